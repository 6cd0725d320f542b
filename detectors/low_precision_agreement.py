"""At float32, float16 and bfloat16, the error is no worse than careful code makes at that precision.

Special inputs by precision (C6). The allowance is derived, not tuned: this repository's
reference runs the same call at the same precision, its error against the float64 loop oracle
is measured, and the implementation may err by a small multiple of that (as flash-attention's
tests do). Casting to half "for speed", a fill value that overflows (−1e9 is −inf in float16),
``0 · −inf`` in an additive mask, or exp without the max subtraction all blow far past it.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION, SOFTMAX
from detectors.kit.verdict import NotApplicable

PROPERTY = "At float32/float16/bfloat16 the error against float64 attention is at most a small multiple of the reference's own."
CLAUSES = ("C6",)
ORACLE = "special-input"
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION, "self-attention": SELF_ATTENTION}


def precisions(subject):
    """The low precisions other than the run's own (the run's, when --dtype scopes it).

    A precision property: judged at the strict allowance of each dtype, never at the precision
    the target was measured to have (that would excuse exactly what it looks for)."""
    low = ("float32", "float16") + (("bfloat16",) if subject.backend == "torch" else ())
    if subject.scope is not None:
        if subject.scope not in low:
            raise NotApplicable(f"its property is about {', '.join(low)}, and --dtype "
                                f"{subject.scope} scopes every call of the run")
        return (subject.scope,)
    return tuple(d for d in low if d != subject.dtype) or low


def check(subject, battery):
    for dtype in precisions(subject):
        if subject.uses("softmax"):
            for call in battery.softmax:
                with subject.trial(call):
                    answer = subject.softmax(call.x, dtype=dtype)
                    want = subject.expected(call)
                    with subject.case(f"{call.name} at {dtype}", answer):
                        expect.close(answer.out, want, subject.strict_allowance(call, want, dtype),
                                     "softmax")
        if subject.uses("attention"):
            for call in subject.cases(battery):
                with subject.trial(call):
                    answer = subject.attend(call, weights=subject.weights_free, dtype=dtype)
                    out, weights = subject.expected(call)
                    with subject.case(f"{call.name} at {dtype}", answer):
                        expect.close(answer.out, out, subject.strict_allowance(call, out, dtype))
                        if subject.weights_free:
                            expect.close(answer.weights, weights,
                                         subject.strict_allowance(call, weights, dtype, "weights"),
                                         "weights")
        if subject.uses("self-attention"):
            for call in battery.self_attention:
                with subject.trial(call):
                    answer = subject.self_attend(call, dtype=dtype)
                    out = subject.expected(call)[0]
                    with subject.case(f"{call.name} at {dtype}", answer):
                        expect.close(answer.out, out, subject.strict_allowance(call, out, dtype))
