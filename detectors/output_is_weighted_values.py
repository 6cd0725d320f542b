"""The output is the weights applied to the values: out = weights @ V.

An invariant between the two things ``attention`` returns (for an output-only kernel: between
its output for V and its output for V = I, which is linearity in V). It catches returning the
weights from one computation and the output from another — pre-mask weights, a transposed
weight matrix, values that were masked or scaled on the side.
"""

from detectors.kit import expect
from detectors.kit.tolerance import allowance

PROPERTY = "The output equals the returned weights times V (for output-only kernels: f(V) = f(I) @ V)."
CLAUSES = ("C3",)
ORACLE = "invariant"


def check(subject, battery):
    if subject.contract == "lesson":
        subject.need("attention")
    for call in battery.calls(subject.contract):
        if not subject.supports(call):
            continue
        answer = subject.attend(call, weights=True)
        out, weights = call.expected(subject.target.causal_alignment)
        expect.same_shape(subject, [answer], answer.weights, weights.shape, "weights", call.name)
        recombined = answer.weights @ call.v_per_query_head()  # (..., L, S) @ (..., S, Ev)
        expect.close(subject, [answer], answer.out, recombined, allowance(subject, call, out),
                     "out", call.name, "out should equal weights @ V")
