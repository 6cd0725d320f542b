"""Outputs come back in the dtype that went in; the causal mask is bool.

An invariant on types (C1, C6). NumPy 2 promotes a float32 array divided by an ``np.float64``
scalar such as ``np.sqrt(d_k)`` to float64; a float32 constant tensor silently upcasts half
inputs; a mask built with ``np.tril(np.ones((T, T)))`` is float. Each works in its own module
and breaks whoever consumes the result.
"""

from detectors.kit import expect

PROPERTY = "causal_mask returns bool; every output has the dtype of the inputs (float64, float32, float16, bfloat16)."
CLAUSES = ("C1", "C6")
ORACLE = "invariant"


def dtypes(subject):
    return ("float64", "float32", "float16") + (("bfloat16",) if subject.backend == "torch" else ())


def check(subject, battery):
    lesson = subject.contract == "lesson"
    tested = False
    if lesson and not subject.manifest.lacks("causal_mask"):
        answer = subject.causal_mask(4)
        expect.dtype(subject, [answer], answer.dtype, "bool", "mask", "causal_mask(4)")
        tested = True
    attention = [c for c in battery.calls(subject.contract) if subject.supports(c)][:3]
    for dtype in dtypes(subject):
        if lesson and not subject.manifest.lacks("softmax"):
            call = battery.softmax[-1]
            answer = subject.softmax(call.x, dtype=dtype)
            expect.dtype(subject, [answer], answer.dtype, dtype, "softmax", call.name)
            tested = True
        if not lesson or not subject.manifest.lacks("attention"):
            for call in attention:
                answer = subject.attend(call, dtype=dtype)
                expect.dtype(subject, [answer], answer.dtype, dtype, "out", call.name)
            tested = True
        if not lesson or not subject.manifest.lacks("causal_self_attention"):
            call = battery.self_attention[0]
            answer = subject.self_attend(call, dtype=dtype)
            expect.dtype(subject, [answer], answer.dtype, dtype, "out", call.name)
            tested = True
    if not tested:
        subject.need("causal_mask", "softmax", "attention", "causal_self_attention")
