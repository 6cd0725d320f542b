"""The output is the weights applied to the values: out = weights @ V.

An invariant between the two things ``attention`` returns (for an output-only kernel: between
its output for V and its output for V = I, which is linearity in V). It catches returning the
weights from one computation and the output from another — pre-mask weights, a transposed
weight matrix, values that were masked or scaled on the side.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "The output equals the returned weights times V (for output-only kernels: f(V) = f(I) @ V)."
CLAUSES = ("C3",)
ORACLE = "invariant"
NEEDS = ATTENTION


def check(subject, battery):
    for call in subject.cases(battery):
        with subject.trial(call):
            answer = subject.attend(call, weights=True)
            out, weights = subject.expected(call)
            with subject.case(call.name, answer, relation="out should equal weights @ V"):
                expect.same_shape(answer.weights, weights.shape, "weights")
                recombined = answer.weights @ call.v_per_query_head()  # (..., L, S) @ (..., S, Ev)
                expect.agree(recombined, answer.out, subject.allowance(call, out),
                             names=("(weights @ V)", "out"))
