"""A query with no key to attend to gets zero weights and a zero output, never NaN.

Special inputs: padding masks close whole rows (seed 003, «Полностью закрытая строка»), and
softmax over a row of −∞ is 0/0. The contract — PyTorch's since 2.5 — is a row of zeros. A large
negative fill instead of −∞ hides the NaN but spreads the row's weight evenly over forbidden
keys, so the output row is the mean of values nobody may see; this detector catches both.
A target that declares that spread as its convention (``--empty-rows uniform``, as JAX and
keras document their masks) is held to it instead: weight 1/S on every key and exactly the
mean of the values (detectors.kit.conventions), never zeros, never NaN.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import empty_rows
from detectors.kit.needs import ATTENTION

PROPERTY = ("Rows with no allowed key give the declared convention's row (zero by default: "
            "all-zero weights and output); no NaN or inf anywhere.")
CLAUSES = ("C5",)
ORACLE = "special-input"
NEEDS = ATTENTION
RELATIONS = {"zero": "rows with no allowed key must be all zero",
             "uniform": "rows with no allowed key must weigh every key 1/S and give the mean of "
                        "the values (the declared uniform convention)"}


def fully_masked(call):
    """The same call with every key forbidden to every query."""
    if call.mask is not None:
        return call.with_(mask=np.zeros_like(call.mask), name=call.name + " (all masked)")
    return call.with_(bias=np.full_like(call.bias, -np.inf), name=call.name + " (all masked)")


def check(subject, battery):
    alignment = subject.target.causal_alignment
    calls = subject.cases(battery)
    with_empty = [c for c in calls if empty_rows(c, alignment).any()]
    masked = [c for c in calls if (c.mask is not None or c.bias is not None) and not c.causal]
    for call in with_empty + [fully_masked(c) for c in masked[:2]]:
        with subject.trial(call):
            answer = subject.attend(call, weights=True)
            empty = empty_rows(call, alignment)  # (..., L)
            out, weights = subject.expected(call)
            with subject.case(call.name, answer):
                expect.finite(answer.out, "out")
                expect.finite(answer.weights, "weights")
                expect.same_shape(answer.out, out.shape, "out")
                expect.same_shape(answer.weights, weights.shape, "weights")
            rows = empty[..., None]  # the expected rows are the declared convention's
            with subject.case(call.name, answer, relation=RELATIONS[subject.empty_rows]):
                expect.close(np.where(rows, answer.weights, 0.0), np.where(rows, weights, 0.0),
                             subject.allowance(call, weights, what="weights"), "weights")
                expect.close(np.where(rows, answer.out, 0.0), np.where(rows, out, 0.0),
                             subject.allowance(call, out), "out")
