"""Attention has no notion of order: permuting queries permutes the output, permuting keys does nothing.

A metamorphic relation from seed 003 («Внимание не знает порядка слов»): without a causal mask,
shuffling the rows of X shuffles the output rows the same way and leaves the vectors unchanged.
Masks and biases travel with their rows and columns. An implementation that mixes positions —
a transposed mask, a softmax over the wrong axis, keys paired with the wrong values — breaks it.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "Permuting queries permutes output rows; permuting keys with their values changes nothing."
CLAUSES = ("C3", "S1")
ORACLE = "metamorphic"
NEEDS = ATTENTION


def permuted(a, order, axis, size):
    """``a`` permuted along ``axis`` when that axis really has ``size`` entries (not broadcast)."""
    if a is None or a.ndim < -axis or a.shape[axis] != size:  # a (S,) mask has no row axis
        return a
    return np.take(a, order, axis=axis)


def derangement(n, rng):
    order = rng.permutation(n)
    return np.roll(np.arange(n), 1) if n > 1 and (order == np.arange(n)).any() else order


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    for call in subject.cases(battery, lambda s: not s.causal):
        with subject.trial(call):
            base, atol = subject.baseline(call)
            L, S = call.q.shape[-2], call.k.shape[-2]
            rows = derangement(L, rng)
            moved = subject.attend(call.with_(
                q=np.take(call.q, rows, axis=-2), mask=permuted(call.mask, rows, -2, L),
                bias=permuted(call.bias, rows, -2, L)))
            relation = f"permuting queries by {rows.tolist()} should permute rows"
            with subject.case(call.name, base, moved, relation=relation):
                expect.agree(np.take(base.out, rows, axis=-2), moved.out, atol,
                             names=("f(x)[P]", "f(x[P])"))
            cols = derangement(S, rng)
            moved = subject.attend(call.with_(
                k=np.take(call.k, cols, axis=-2), v=np.take(call.v, cols, axis=-2),
                mask=permuted(call.mask, cols, -1, S), bias=permuted(call.bias, cols, -1, S)))
            relation = f"permuting keys and values by {cols.tolist()} should change nothing"
            with subject.case(call.name, base, moved, relation=relation):
                expect.agree(base.out, moved.out, atol, names=("f(x)", "f(x, keys permuted)"))
