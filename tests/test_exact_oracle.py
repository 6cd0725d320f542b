"""The oracle ladder: the plain-loop oracle judges the vectorised exact oracle on small cases.

Every quick case, every small case of the deeper tiers, and every deep spec shrunk to a few
tokens (same rank, mask kind, grouping, causality) must agree to float64 rounding — so the
exact oracle that computes ``Call.expected`` at scale is judged on every structure it meets.
"""

from dataclasses import replace

import numpy as np
import pytest

from detectors.kit import sweep
from detectors.kit.battery import Battery, materialise
from reference import exact, loop_oracle

QUICK = Battery(0)


def _both(call, alignment="top-left"):
    kw = dict(mask=call.mask, bias=call.bias, scale=call.scale, gqa=call.gqa,
              causal=alignment if call.causal else None)
    return (exact.attend(call.q, call.k, call.v, **kw),
            loop_oracle.attend(call.q, call.k, call.v, **kw))


def _agree(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max()))


def _shrunk(spec):
    """The spec with every length at most 9 and every head dim at most 5, structure kept."""
    L, S = min(spec.q[-2], 9), min(spec.k[-2], 9)
    if spec.causal and spec.q[-2] == spec.k[-2]:
        S = L
    E, Ev = min(spec.q[-1], 5), min(spec.v[-1], 5)
    shape = lambda t, n, d: t[:-2] + (n, d)  # noqa: E731
    m = spec.mask_shape
    if m is not None:
        m = m[:-2] + (min(m[-2], L) if m[-2] > 1 else 1, S) if len(m) > 1 else (S,)
    return replace(spec, q=shape(spec.q, L, E), k=shape(spec.k, S, E), v=shape(spec.v, S, Ev),
                   mask_shape=m)


@pytest.mark.parametrize("call", QUICK.attention, ids=lambda c: c.name)
@pytest.mark.parametrize("alignment", ["top-left", "bottom-right"])
def test_exact_agrees_with_loops_on_quick(call, alignment):
    _agree(*_both(call, alignment))


@pytest.mark.parametrize("spec", sweep.STANDARD + sweep.deep(), ids=lambda s: s.name)
def test_exact_agrees_with_loops_on_every_deeper_structure(spec):
    call = materialise(_shrunk(spec), np.random.default_rng(7))
    _agree(*_both(call))


def test_exact_softmax_agrees_with_loops():
    for call in QUICK.softmax:
        np.testing.assert_allclose(exact.softmax(call.x), loop_oracle.softmax(call.x), atol=1e-15)
    row = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]])
    np.testing.assert_array_equal(exact.softmax(row)[0], [0.0, 0.0, 0.0])  # C5: never NaN


def test_expected_at_scale_comes_from_the_exact_oracle_and_is_cheap():
    """A 1024-key case is beyond the loop oracle's budget; its answer is still exact attention."""
    call = next(c for c in Battery(0, depth="deep").attention if c.k.shape[-2] >= 1023)
    out, weights = call.expected()
    assert np.allclose(weights.sum(-1)[weights.sum(-1) > 0], 1.0, atol=1e-12)
    assert out.shape[-1] == call.v.shape[-1] and np.isfinite(out).all()
