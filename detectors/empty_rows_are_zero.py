"""A query with no key to attend to gets zero weights and a zero output, never NaN.

Special inputs: padding masks close whole rows (seed 003, «Полностью закрытая строка»), and
softmax over a row of −∞ is 0/0. The contract — PyTorch's since 2.5 — is a row of zeros. A large
negative fill instead of −∞ hides the NaN but spreads the row's weight evenly over forbidden
keys, so the output row is the mean of values nobody may see; this detector catches both.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import empty_rows
from detectors.kit.tolerance import allowance

PROPERTY = "Rows with no allowed key give all-zero weights and an all-zero output row; no NaN or inf anywhere."
CLAUSES = ("C5",)
ORACLE = "special-input"


def fully_masked(call):
    """The same call with every key forbidden to every query."""
    if call.mask is not None:
        return call.with_(mask=np.zeros_like(call.mask), name=call.name + " (all masked)")
    return call.with_(bias=np.full_like(call.bias, -np.inf), name=call.name + " (all masked)")


def check(subject, battery):
    if subject.contract == "lesson":
        subject.need("attention")
    alignment = subject.target.causal_alignment
    calls = [c for c in battery.calls(subject.contract) if subject.supports(c)]
    with_empty = [c for c in calls if empty_rows(c, alignment).any()]
    masked = [c for c in calls if (c.mask is not None or c.bias is not None) and not c.causal]
    cases = with_empty + [fully_masked(c) for c in masked[:2]]
    if not cases:
        subject.need("a masked call")
    for call in cases:
        answer = subject.attend(call, weights=True)
        empty = empty_rows(call, alignment)  # (..., L)
        out, weights = call.expected(alignment)
        expect.finite(subject, [answer], answer.out, "out", call.name)
        expect.finite(subject, [answer], answer.weights, "weights", call.name)
        expect.same_shape(subject, [answer], answer.out, out.shape, "out", call.name)
        expect.same_shape(subject, [answer], answer.weights, weights.shape, "weights", call.name)
        rows = empty[..., None]
        expect.close(subject, [answer], np.where(rows, answer.weights, 0.0), np.zeros_like(weights),
                     allowance(subject, call, weights, what="weights"), "weights", call.name,
                     "rows with no allowed key must be all zero")
        expect.close(subject, [answer], np.where(rows, answer.out, 0.0), np.zeros_like(out),
                     allowance(subject, call, out), "out", call.name,
                     "rows with no allowed key must be all zero")
