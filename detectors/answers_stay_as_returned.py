"""An array once returned is the caller's: no later call changes it.

A side-effect check (C7) on what the implementation keeps between calls. Kernels and inference
engines avoid an allocation per call by writing into a workspace they keep — and some return a
view of it, so the next call silently rewrites the answer the caller is still holding (PyTorch
documents exactly this of CUDA-graph outputs). The sandbox keeps each answer as it was
returned; after later calls of smaller, larger and differently shaped inputs its arrays are
read again and must be bit-identical to what was read at first; past the quick tier, once more a
moment later (``LATE``), for an answer a background thread or stream changes after the call has
returned. And in a check, where the harness keeps each worker's first answers to its end, those
are read once more when the worker ends (``at_end``): a workspace that comes round again only
after many calls (a ring of output buffers) has come round by then. (That a call's *answer* does not depend on the calls before it — after a larger one
included — is :mod:`call_order_independence`'s property.)
"""

import time

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SOFTMAX

PROPERTY = "A returned array (out, and the weights a lesson function returns) never changes when later calls of other shapes are made, nor a moment after the call returned."
CLAUSES = ("C7",)
ORACLE = "side-effect"
NEEDS = {"attention": ATTENTION, "softmax": SOFTMAX}
KEPT = "the answer as returned, read again after later calls of other shapes"
# past quick, each kept answer is read once more this long after it was returned: an answer a
# background thread or stream finishes (or reuses) a moment after the call came back is caught
LATE = {"standard": 0.25, "deep": 1.0}  # seconds


def picks(calls):
    """The smallest, a middle and the largest call, smallest first."""
    chosen = [calls[0], calls[len(calls) // 2], calls[-1]] if calls else []
    return list({id(c): c for c in chosen}.values())


def unchanged(subject, calls, run, name, late=None):
    start = time.monotonic()
    first = subject.answers(calls, lambda c: run(c, True), name)  # kept as returned
    calls = [c for c, _ in first]  # those answered
    later = subject.answers(calls[::-1], lambda c: run(c, False), name)  # larger, smaller, …
    made = first + later  # in the order made
    for i, (call, answer) in enumerate(first):
        nxt = [a for c, a in made[i + 1:] if c is not call][:1]  # the reproduction's second
        as_returned(subject, name(call), answer, nxt, KEPT)
    if late is None or not first:
        return
    time.sleep(max(0.0, start + late - time.monotonic()))
    for call, answer in first:
        as_returned(subject, name(call), answer, [],
                    f"the answer as returned, read again {late:g} s later")


def as_returned(subject, case, answer, others, relation):
    """``answer`` read again now is bit for bit what was read when it was returned."""
    with subject.trial(case):
        now = subject.reread(answer)
        with subject.case(case, answer, *others, relation=relation):
            expect.identical(answer.out, now.out, "out", ("returned", "later"))
            if answer.weights is not None:
                expect.identical(answer.weights, now.weights, "weights", ("returned", "later"))


def at_end(subject, ended):
    """``ended``: [(request, values as returned, values when its worker ended)] of the answers
    that changed: each is a failing case of this property."""
    for request, returned, now in ended:
        case = getattr(request, "case", None) or request.describe()
        with subject.trial(case):
            answer = subject.as_returned(request, returned)
            with subject.case(case, answer, relation="the answer as returned, read again when "
                              "its worker ended, after every later call"):
                for i, (before, after) in enumerate(zip(returned, now)):
                    expect.identical(before, after, "out" if i == 0 else f"answer {i}",
                                     ("returned", "at the end"))


def check(subject, battery):
    if subject.uses("attention"):
        weights = subject.weights_free  # a lesson function returns its weights: keep both
        unchanged(subject, picks(subject.cases(battery)),
                  lambda c, keep: subject.attend(c, weights=weights, keep=keep),
                  lambda c: c.name, LATE.get(battery.depth))
    if subject.uses("softmax"):
        calls = sorted(battery.softmax, key=lambda c: c.size())
        unchanged(subject, calls, lambda c, keep: subject.softmax(c.x, keep=keep),
                  lambda c: c.name, LATE.get(battery.depth))
