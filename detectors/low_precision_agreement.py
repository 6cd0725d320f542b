"""At float32, float16 and bfloat16, the error is no worse than careful code makes at that precision.

Special inputs by precision (C6). The allowance is derived, not tuned: this repository's
reference runs the same call at the same precision, its error against the float64 loop oracle
is measured, and the implementation may err by a small multiple of that (as flash-attention's
tests do). Casting to half "for speed", a fill value that overflows (−1e9 is −inf in float16),
``0 · −inf`` in an additive mask, or exp without the max subtraction all blow far past it.

The format's range is part of the property. The output is a weighted average of V's rows, so
it stays inside their range however close V comes to float16's largest finite value (65504);
an output accumulated unnormalised in float16 — Σ exp(s − max)·v before dividing by the row's
sum, up to S times |v| — overflows to inf there. A few cases are run again at float16 with V's
entries mapped onto exact float16 values in [32768, 57344]: headroom for correct rounding, none
for an unnormalised sum of two or more comparable rows.
"""

import functools

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION, SOFTMAX
from detectors.kit.verdict import NotApplicable

PROPERTY = "At float32/float16/bfloat16 the error against float64 attention is at most a small multiple of the reference's own, V near float16's largest finite included."
CLAUSES = ("C6",)
ORACLE = "special-input"
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION, "self-attention": SELF_ATTENTION}
# the range V's entries are mapped onto for each format's range relation, and their spacing
# there (exact values of the format; the top stays 1/8 below its largest finite, 65504)
NEAR_LARGEST = {"float16": (32768.0, 57344.0, 32.0)}
RANGE_CASES = 4  # cases run again with V near the largest finite, from smallest to largest


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
            if dtype in NEAR_LARGEST:
                for call in spread(subject.cases(battery), RANGE_CASES):
                    with subject.trial(call):
                        near_largest(subject, call, dtype)
        if subject.uses("self-attention"):
            for call in battery.self_attention:
                with subject.trial(call):
                    answer = subject.self_attend(call, dtype=dtype)
                    out = subject.expected(call)[0]
                    with subject.case(f"{call.name} at {dtype}", answer):
                        expect.close(answer.out, out, subject.strict_allowance(call, out, dtype))


def spread(cases, n):
    """At most ``n`` of ``cases`` (smallest first), the smallest and the largest among them."""
    if len(cases) <= n:
        return list(cases)
    return [cases[round(i * (len(cases) - 1) / (n - 1))] for i in range(n)]


def near_largest(subject, call, dtype):
    """``call`` with V's entries mapped monotonically onto the format's exact values in
    [low, high]: the answer is a weighted average of V's rows, inside that range, and within
    the reference's own error of the exact answer."""
    low, high, _ = NEAR_LARGEST[dtype]
    near = moved_near_largest(call, dtype)
    answer = subject.attend(near, dtype=dtype)
    out = subject.expected(near)[0]
    relation = f"V's entries in [{low:g}, {high:g}] at {dtype}: the answer averages V's rows"
    with subject.case(f"{call.name} at {dtype}", answer, relation=relation):
        expect.close(answer.out, out, subject.strict_allowance(near, out, dtype))


@functools.lru_cache(maxsize=64)
def moved_near_largest(call, dtype):
    """``call`` with V mapped onto the format's top range: one object per case, so the loop
    oracle's answer to it is computed once for every target judged in this process."""
    low, high, step = NEAR_LARGEST[dtype]
    v = np.abs(call.v)  # (..., S, Ev)
    span = float(v.max()) or 1.0
    return call.with_(v=low + step * np.round(v / span * (high - low) / step))
