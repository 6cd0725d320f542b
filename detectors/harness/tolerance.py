"""How close is close enough, derived rather than tuned.

At float64 every correct algorithm agrees with exact attention to about 1e-15; the allowance
below is a thousand times wider and still a million times narrower than a float32 shortcut.
At float32, float16 and bfloat16 the allowance is derived as flash-attention's tests derive
theirs: run this repository's reference at the same precision, measure its error against the
float64 loop oracle on the very same call, and allow a small multiple of it.
"""

import functools

import numpy as np

from detectors.harness.executor import InProcess
from detectors.harness.target import Target

FLOAT64_ATOL = 1e-10  # times max(1, |expected|)
MULTIPLE = 4  # of the reference's own error at the call's precision
EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
REFERENCES = {
    ("lesson", "numpy"): "reference.lesson_numpy",
    ("lesson", "torch"): "reference.lesson_torch",
    ("sdpa", "torch"): "reference.sdpa:scaled_dot_product_attention",
}


def scale(expected):
    finite = np.abs(expected[np.isfinite(expected)])
    return max(1.0, float(finite.max())) if finite.size else 1.0


def allowance(subject, call, expected, dtype=None, what="out"):
    """The largest absolute error allowed in ``what`` ("out" or "weights") of ``call``."""
    dtype = dtype or subject.dtype
    floor = EPS[dtype] * scale(expected)
    if dtype == "float64":
        return FLOAT64_ATOL * scale(expected)
    reference = reference_subject(subject.target.contract, subject.target.backend,
                                  subject.target.device)
    return MULTIPLE * reference_error(reference, call, dtype, what) + floor


def reference_error(reference, call, dtype, what):
    """Max |reference at dtype − float64 oracle| on this call (its own precision)."""
    return _reference_error(reference, call, dtype, what)


@functools.lru_cache(maxsize=8192)
def _reference_error(reference, call, dtype, what):
    from detectors.harness.battery import SelfCall, SoftmaxCall

    if isinstance(call, SelfCall):
        answer = reference.self_attend(call, weights=what == "weights", dtype=dtype)
        want = call.expected()
    elif isinstance(call, SoftmaxCall):
        answer = reference.softmax(call.x, dtype=dtype)
        return float(np.nanmax(np.abs(answer.out - call.expected()), initial=0.0))
    else:
        answer = reference.attend(call, weights=what == "weights", dtype=dtype)
        want = call.expected("top-left")
    got = answer.weights if what == "weights" else answer.out
    diff = np.abs(got - (want[1] if what == "weights" else want[0]))
    return float(np.nanmax(diff, initial=0.0))


@functools.lru_cache(maxsize=None)
def reference_subject(contract, backend, device):
    from detectors.harness.subject import Subject

    locator = REFERENCES[(contract, backend)]
    target = Target("reference", locator, contract, backend, device=device)
    return Subject(target, InProcess(target))
