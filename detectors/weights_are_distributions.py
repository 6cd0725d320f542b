"""Each row of attention weights is a probability distribution over the keys it may see.

An invariant: it needs no second implementation, only the definition of softmax. Weights are
non-negative, a row sums to 1 (0 for a row with no allowed key) and a forbidden key gets exactly
0 — not 1e-9, which is what a large negative fill leaves behind. Masking after softmax breaks
the sum; a mask filled with 0 breaks the zeros. Under a declared ``uniform`` convention a row
with no allowed key reads every key (detectors.kit.conventions), so it sums to 1 as well.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SOFTMAX

PROPERTY = (
    "Weights are non-negative, and each row sums to 1 with exactly 0 on every forbidden key, "
    "except a row with no allowed key, which is the declared convention's (all 0 by default)."
)
CLAUSES = ("C2", "C3", "C5", "S1")
ORACLE = "invariant"
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION}


def distribution(subject, answer, weights, keep, atol, case):
    """Check one weights array against the allowed pattern ``keep`` (same shape)."""
    with subject.case(case, answer):
        expect.finite(weights, "weights")
        expect.same_shape(weights, keep.shape, "weights")
        negative = weights < -atol
        if negative.any():
            index = expect.first(negative)
            expect.fail(f"{expect.at('weights', index)} >= 0", expect.fmt(weights[index]), index)
        leaked = ~keep & (weights != 0)
        if leaked.any():
            index = expect.first(leaked)
            expect.fail(f"{expect.at('weights', index)} = 0 exactly (a forbidden key)",
                        expect.fmt(weights[index]), index)
        expect.close(weights.sum(axis=-1), keep.any(axis=-1).astype(float),
                     atol * keep.shape[-1], "row sum")


def check(subject, battery):
    if subject.uses("softmax"):
        for call in battery.softmax:
            with subject.trial(call):
                answer = subject.softmax(call.x)
                keep = ~np.isneginf(call.x)
                distribution(subject, answer, answer.out, keep,
                             subject.allowance(call, subject.expected(call)), call.name)
    if subject.uses("attention"):
        for call in subject.cases(battery):
            with subject.trial(call):
                answer = subject.attend(call, weights=True)
                keep = subject.seen(call)  # the keys each row reads
                want = subject.expected(call)[1]
                distribution(subject, answer, answer.weights, keep,
                             subject.allowance(call, want, what="weights"), call.name)
