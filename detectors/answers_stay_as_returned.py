"""An array once returned is the caller's: no later call changes it, and no later call's answer
depends on the calls before it.

A side-effect check (C7) on what the implementation keeps between calls. Kernels and inference
engines avoid an allocation per call by writing into a workspace they keep — and some return a
view of it, so the next call silently rewrites the answer the caller is still holding (PyTorch
documents exactly this of CUDA-graph outputs). The sandbox keeps each answer as it was
returned and reads its arrays again after later calls of larger and differently shaped
inputs; they must be bit-identical to what was read at first. Then each call is made again
after the larger ones and must equal its first answer, made before any of them — the first
call on a fresh implementation is the call made alone — which a workspace sized by the
largest call so far, read past the current call's end, gets wrong.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SOFTMAX

PROPERTY = "A returned array never changes after later calls, and a call made after larger or differently shaped ones equals the same call made first."
CLAUSES = ("C7",)
ORACLE = "side-effect"
NEEDS = {"attention": ATTENTION, "softmax": SOFTMAX}
KEPT = "the answer as returned, read again after later calls of other shapes"
AGAIN = "the same call, made first and again after larger calls of other shapes"


def picks(calls):
    """The smallest, a middle and the largest call, smallest first: each later one larger."""
    chosen = [calls[0], calls[len(calls) // 2], calls[-1]] if calls else []
    return list({id(c): c for c in chosen}.values())


def unchanged(subject, calls, run, name):
    first = [run(c, True) for c in calls]  # kept as returned; ascending sizes
    again = [run(c, False) for c in reversed(calls)][::-1]  # each after larger ones
    for i, (call, answer) in enumerate(zip(calls, first)):
        now = subject.reread(answer)
        later = (first[i + 1:] + again)[:1]  # the next call made: the reproduction's second
        with subject.case(name(call), answer, *later, relation=KEPT):
            expect.identical(answer.out, now.out, "out", ("returned", "later"))
            if answer.weights is not None:
                expect.identical(answer.weights, now.weights, "weights", ("returned", "later"))
    for call, answer, later in zip(calls, first, again):
        with subject.case(name(call), answer, later, relation=AGAIN):
            expect.identical(answer.out, later.out, "out", ("1st f(x)", "f(x) after larger"))


def check(subject, battery):
    subject.fresh()  # the first call must be made on an implementation with no history
    if subject.uses("attention"):
        calls = picks(subject.cases(battery))
        weights = subject.weights_free  # a lesson function returns its weights: keep both
        unchanged(subject, calls,
                  lambda c, keep: subject.attend(c, weights=weights, keep=keep),
                  lambda c: c.name)
    if subject.uses("softmax"):
        calls = sorted(battery.softmax, key=lambda c: c.size())
        unchanged(subject, calls, lambda c, keep: subject.softmax(c.x, keep=keep),
                  lambda c: c.name)
