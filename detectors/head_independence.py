"""Heads do not talk to each other: a head's output depends on its own query, key and value only.

A perturbation oracle across the head axis (-3). Changing query head h moves output head h
alone; changing key/value head j moves exactly the query heads it serves — head j, or with
grouped-query attention the g consecutive heads j·g … j·g+g−1. A softmax across heads, heads
merged in the wrong order, or key/value heads shared with the wrong query heads all spill over.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "Changing one head's query (or key/value) changes only the output heads that head feeds."
CLAUSES = ("C3", "S4")
ORACLE = "perturbation"
BUMP = 1.5
NEEDS = ATTENTION


def served(call, j):
    """Query heads that read key/value head j."""
    H = call.q.shape[-3]
    g = H // call.k.shape[-3] if call.gqa else 1
    return np.arange(H) // g == j


def check(subject, battery):
    calls = subject.cases(battery, lambda s: len(s.q) >= 4 and len(s.k) == len(s.q) and s.q[-3] > 1)
    for call in calls:
        with subject.trial(call):
            base, atol = subject.baseline(call)
            H, H_kv = call.q.shape[-3], call.k.shape[-3]
            for h in sorted({0, H - 1}):
                q = call.q.copy()
                q[..., h, :, :] += BUMP
                moved = subject.attend(call.with_(q=q))
                others = (np.arange(H) != h)[:, None, None]  # (H, 1, 1)
                relation = f"changing query head {h} should leave other heads unchanged"
                with subject.case(call.name, base, moved, relation=relation):
                    expect.agree(np.where(others, base.out, 0.0), np.where(others, moved.out, 0.0),
                                 atol, names=("f(x)", f"f(x with query head {h} changed)"))
            for j in sorted({0, H_kv - 1}):
                k, v = call.k.copy(), call.v.copy()
                k[..., j, :, :] += BUMP
                v[..., j, :, :] += BUMP
                moved = subject.attend(call.with_(k=k, v=v))
                others = (~served(call, j))[:, None, None]  # (H, 1, 1)
                relation = f"changing key/value head {j} should move only the query heads it serves"
                with subject.case(call.name, base, moved, relation=relation):
                    expect.agree(np.where(others, base.out, 0.0), np.where(others, moved.out, 0.0),
                                 atol, names=("f(x)", f"f(x with key/value head {j} changed)"))
