"""Each row of attention weights is a probability distribution over the keys it may see.

An invariant: it needs no second implementation, only the definition of softmax. Weights are
non-negative, a row sums to 1 (0 for a row with no allowed key) and a forbidden key gets exactly
0 — not 1e-9, which is what a large negative fill leaves behind. Masking after softmax breaks
the sum; a mask filled with 0 breaks the zeros.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import allowed
from detectors.kit.tolerance import allowance

PROPERTY = (
    "Weights are non-negative, each row sums to 1 (0 when no key is allowed), "
    "and every forbidden key gets exactly 0."
)
CLAUSES = ("C2", "C3", "C5", "S1")
ORACLE = "invariant"


def distribution(subject, answer, weights, keep, atol, case):
    """Check one weights array against the allowed pattern ``keep`` (same shape)."""
    expect.finite(subject, [answer], weights, "weights", case)
    expect.same_shape(subject, [answer], weights, keep.shape, "weights", case)
    negative = weights < -atol
    if negative.any():
        index = tuple(np.argwhere(negative)[0])
        expect.holds(subject, [answer], False, f"{expect.at('weights', index)} >= 0",
                     expect.fmt(weights[index]), case, index)
    leaked = ~keep & (weights != 0)
    if leaked.any():
        index = tuple(np.argwhere(leaked)[0])
        expect.holds(subject, [answer], False,
                     f"{expect.at('weights', index)} = 0 exactly (a forbidden key)",
                     expect.fmt(weights[index]), case, index)
    sums = weights.sum(axis=-1)
    want = keep.any(axis=-1).astype(float)
    expect.close(subject, [answer], sums, want, atol * keep.shape[-1], "row sum", case)


def check(subject, battery):
    alignment = subject.target.causal_alignment
    if subject.contract == "lesson" and not subject.manifest.lacks("softmax"):
        for call in battery.softmax:
            answer = subject.softmax(call.x)
            keep = ~np.isneginf(call.x)
            distribution(subject, answer, answer.out, keep,
                         allowance(subject, call, call.expected()), call.name)
    if subject.contract == "lesson" and subject.manifest.lacks("attention"):
        subject.need("softmax")
        return
    for call in battery.calls(subject.contract):
        if not subject.supports(call):
            continue
        answer = subject.attend(call, weights=True)
        keep = allowed(call, alignment)
        want = call.expected(alignment)[1]
        distribution(subject, answer, answer.weights, keep,
                     allowance(subject, call, want, what="weights"), call.name)
