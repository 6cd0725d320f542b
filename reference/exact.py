"""Exact (float64) attention, vectorised: the oracle at sizes the plain loops cannot reach.

Same signature and semantics as :func:`reference.loop_oracle.attend`, written with whole-array
NumPy operations so a call of 1024 queries by 1024 keys costs one matrix product instead of a
million Python iterations. It shares no code with the loop oracle or with the torch reference,
and the loop oracle judges it on every small case (``tests/test_exact_oracle.py``): the oracle
ladder. Forbidden keys and ``-inf`` biases get weight exactly 0; a row with no allowed key gets
zero weights and a zero output, as in clause C5.
"""

import math

import numpy as np


def allowed_causal(L, S, alignment):
    """(L, S) bool: may query i attend key j under this causal alignment."""
    if alignment not in ("top-left", "bottom-right"):
        raise ValueError(f"unknown causal alignment {alignment!r}: "
                         "use 'top-left' or 'bottom-right'")
    offset = 0 if alignment == "top-left" else S - L
    return np.arange(S)[None, :] <= np.arange(L)[:, None] + offset  # (L, S)


def softmax(x):
    """Softmax over the last axis; -inf entries weigh 0 and an all -inf row gives zeros."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)  # (..., n): only -inf occurs as a non-finite score
    top = np.max(np.where(finite, x, -np.inf), axis=-1, keepdims=True)  # (..., 1)
    top = np.where(np.isneginf(top), 0.0, top)  # an empty row: shift by 0, every exp is 0
    e = np.exp(np.where(finite, x - top, -np.inf))  # (..., n): a masked entry weighs exp(-inf) = 0
    total = e.sum(axis=-1, keepdims=True)  # (..., 1)
    return e / np.where(total == 0, 1.0, total)


def attend(q, k, v, mask=None, bias=None, scale=None, causal=None, gqa=False):
    """(out, weights) for float64 arrays; arguments as in :func:`reference.loop_oracle.attend`."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    L, E = q.shape[-2:]
    S = k.shape[-2]
    factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    if gqa:  # query head h reads key/value head h // g
        group = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * factor  # (..., L, S)
    keep = np.ones((L, S), dtype=bool)
    if mask is not None:
        keep = keep & _as_matrix(np.asarray(mask, dtype=bool))  # (..., L, S)
    if causal is not None:
        keep = keep & allowed_causal(L, S, causal)
    if bias is not None:
        scores = scores + _as_matrix(np.asarray(bias, dtype=np.float64))
    lead = np.broadcast_shapes(scores.shape[:-2], keep.shape[:-2], v.shape[:-2])
    scores = np.where(keep, scores, -np.inf)  # (..., L, S), broadcast over every lead axis
    weights = softmax(np.broadcast_to(scores, lead + (L, S)))  # (..., L, S)
    return np.matmul(weights, v), weights  # (..., L, Ev), (..., L, S)


def _as_matrix(m):
    """A mask or bias with at least two axes, so a (S,) row broadcasts like (1, S)."""
    return m.reshape((1,) * (2 - m.ndim) + m.shape) if m.ndim < 2 else m
