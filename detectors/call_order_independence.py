"""A result does not depend on what was called before it.

A side-effect check for hidden state: calls of different sizes are made in one order and then
in the reverse order, and each must come out bit-identical both times. A mask cached at the
first size seen, a buffer that grows, a running statistic or a cache keyed on the wrong thing
makes a call's answer depend on its history.
"""

from detectors.kit import expect

PROPERTY = "Each call's result is identical whether it is made before or after calls of other sizes."
CLAUSES = ("C7",)
ORACLE = "side-effect"


def in_both_orders(subject, calls, run):
    forward = [run(c) for c in calls]
    backward = [run(c) for c in reversed(calls)][::-1]
    for call, a, b in zip(calls, forward, backward):
        expect.equal(subject, [a, b], b.out, a.out, "out", call.name,
                     "the same call, made before and after calls of other sizes")


def check(subject, battery):
    subject.fresh()  # state left by earlier detectors would hide a first-call cache
    lesson = subject.contract == "lesson"
    tested = False
    if not lesson or not subject.manifest.lacks("causal_self_attention"):
        in_both_orders(subject, battery.self_attention, subject.self_attend)
        tested = True
    if not lesson or not subject.manifest.lacks("attention"):
        calls = [c for c in battery.calls(subject.contract) if subject.supports(c)]
        in_both_orders(subject, calls, subject.attend)
        tested = True
    if lesson and not subject.manifest.lacks("causal_mask"):
        sizes = (2, 5, 3, 7)
        forward = {T: subject.causal_mask(T) for T in sizes}
        backward = {T: subject.causal_mask(T) for T in reversed(sizes)}
        for T in sizes:
            expect.equal(subject, [forward[T], backward[T]], backward[T].out, forward[T].out,
                         "mask", f"causal_mask({T})", "causal_mask before and after other sizes")
        tested = True
    if not tested:
        subject.need("attention", "causal_self_attention", "causal_mask")
