"""Outputs come back in the dtype that went in — the attention weights too; the causal mask is bool.

An invariant on types (C1, C6). NumPy 2 promotes a float32 array divided by an ``np.float64``
scalar such as ``np.sqrt(d_k)`` to float64; a float32 constant tensor silently upcasts half
inputs; a mask built with ``np.tril(np.ones((T, T)))`` is float. Each works in its own module
and breaks whoever consumes the result. The weights a lesson function returns are an output
like ``out``: a softmax upcast to float32 for stability and cast back only for the product
hands float32 weights to whoever reads them.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, CAUSAL_MASK, SELF_ATTENTION, SOFTMAX

PROPERTY = "causal_mask returns bool; every output, weights included, has the dtype of the inputs (float64, float32, float16, bfloat16)."
CLAUSES = ("C1", "C6")
ORACLE = "invariant"
NEEDS = {"causal_mask": CAUSAL_MASK, "softmax": SOFTMAX, "attention": ATTENTION,
         "self-attention": SELF_ATTENTION}
CAUSE = "dtype"  # a dtype that does not come back is a finding about that dtype, not a case


def dtypes(subject):
    """Every dtype the backend has, or only the one a --dtype run is scoped to."""
    every = ("float64", "float32", "float16") + (("bfloat16",) if subject.backend == "torch"
                                                 else ())
    return subject.dtypes(every)


def returns(subject, answer, dtype, what, case):
    """``answer`` came back as ``dtype``, or as what the target declares for it
    (``float64=returned-as-float32``: keras' type promotion)."""
    dtype = subject.returned_as(dtype)
    with subject.case(case, answer):
        expect.dtype(answer.dtype, dtype, what)
        if answer.weights_dtype is not None:  # a lesson function returns its weights too
            expect.dtype(answer.weights_dtype, dtype, "weights")


def check(subject, battery):
    if subject.uses("causal_mask"):
        with subject.trial("causal_mask(4)"):
            returns(subject, subject.causal_mask(4), "bool", "mask", "causal_mask(4)")
    attention = subject.cases(battery)[:3]
    for dtype in dtypes(subject):
        if subject.uses("softmax"):
            call = battery.softmax[-1]
            with subject.trial(f"{call.name} at {dtype}"):
                returns(subject, subject.softmax(call.x, dtype=dtype), dtype, "softmax",
                        call.name)
        if subject.uses("attention"):
            for call in attention:
                with subject.trial(call):
                    returns(subject, subject.attend(call, dtype=dtype), dtype, "out", call.name)
        if subject.uses("self-attention"):
            call = battery.self_attention[0]
            with subject.trial(call):
                returns(subject, subject.self_attend(call, dtype=dtype), dtype, "out", call.name)
