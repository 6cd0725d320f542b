"""Each query reads the keys on its own: changing query i changes output row i and no other.

A perturbation oracle. Softmax normalises each query's row separately, so nothing about query i
can reach another row. A softmax over the query axis, scores normalised by statistics of the
whole matrix, or batch items sharing a normaliser all let one query move another's output.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "Changing query i changes output row i only; every other row stays as it was."
CLAUSES = ("C3",)
ORACLE = "perturbation"
BUMP = 1.5
NEEDS = ATTENTION


def check(subject, battery):
    for call in subject.cases(battery, lambda s: s.q[-2] >= 2):
        with subject.trial(call):
            L = call.q.shape[-2]
            base, atol = subject.baseline(call)
            for i in sorted({0, L // 2, L - 1}):
                q = call.q.copy()
                q[..., i, :] += BUMP
                moved = subject.attend(call.with_(q=q))
                others = (np.arange(L) != i)[:, None]  # (L, 1)
                relation = f"changing query {i} should leave every other row unchanged"
                with subject.case(call.name, base, moved, relation=relation):
                    expect.agree(np.where(others, base.out, 0.0), np.where(others, moved.out, 0.0),
                                 atol, names=("f(x)", f"f(x with query {i} changed)"))
