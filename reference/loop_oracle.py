"""Attention as plain Python loops over queries and keys: the differential detector's judge.

Nothing here is vectorised and nothing is shared with the other reference files: every score
is a ``math.fsum`` of products, every weight a ``math.exp``, every index spelled out. It is slow
and obviously right, so a disagreement points at the implementation under test.
"""

import itertools
import math

import numpy as np


def causal_allowed(i, j, L, S, alignment):
    """May query i attend key j under a causal mask of this alignment."""
    if alignment == "top-left":
        return j <= i
    if alignment == "bottom-right":
        return j <= i + (S - L)
    raise ValueError(f"unknown causal alignment {alignment!r}: use 'top-left' or 'bottom-right'")


def causal_mask(T):
    return np.array([[j <= i for j in range(T)] for i in range(T)], dtype=bool)


def softmax_row(scores):
    """Weights for one row of scores, where None marks a forbidden key."""
    finite = [s for s in scores if s is not None and s != -math.inf]
    if not finite:
        return [0.0] * len(scores)
    top = max(finite)
    exps = [0.0 if s is None or s == -math.inf else math.exp(s - top) for s in scores]
    total = math.fsum(exps)
    return [e / total for e in exps]


def softmax(x):
    """Softmax over the last axis of an array, row by row."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for idx in itertools.product(*(range(n) for n in x.shape[:-1])):
        out[idx] = softmax_row([float(s) for s in x[idx]])
    return out


def attend(q, k, v, mask=None, bias=None, scale=None, causal=None, gqa=False):
    """(out, weights) of attention for float64 arrays, one query and one key at a time.

    q (..., L, E), k (..., S, E), v (..., S, Ev); ``mask`` bool, True = may attend; ``bias``
    float, added to the scaled scores; both broadcast to (..., L, S). ``causal`` is None,
    'top-left' or 'bottom-right'. With ``gqa`` the key/value head axis (-3) is shorter than
    the query's and head h reads key/value head h // (H_q / H_kv).
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    group = q.shape[-3] // k.shape[-3] if gqa else 1
    kv_lead = list(k.shape[:-2])
    if gqa:
        kv_lead[-1] = q.shape[-3]  # broadcast as if every query head had its own key head
    mask, bias = (None if m is None else _as_matrix(m) for m in (mask, bias))
    extras = [m.shape[:-2] for m in (mask, bias) if m is not None]
    lead = np.broadcast_shapes(q.shape[:-2], tuple(kv_lead), *extras)
    weights = np.zeros(lead + (L, S))
    out = np.zeros(lead + (L, Ev))
    for idx in itertools.product(*(range(n) for n in lead)):
        qi = _pick(q, idx)
        kv_idx = idx[:-1] + (idx[-1] // group,) if gqa else idx
        ki, vi = _pick(k, kv_idx), _pick(v, kv_idx)
        mi = None if mask is None else _pick(mask, idx)
        bi = None if bias is None else _pick(bias, idx)
        for i in range(L):
            row = []
            for j in range(S):
                forbidden = (mi is not None and not _at(mi, i, j)) or (
                    causal is not None and not causal_allowed(i, j, L, S, causal)
                )
                if forbidden:
                    row.append(None)
                    continue
                s = factor * math.fsum(float(qi[i, e]) * float(ki[j, e]) for e in range(E))
                if bi is not None:
                    s += float(_at(bi, i, j))
                row.append(s)
            w = softmax_row(row)
            for j in range(S):
                weights[idx + (i, j)] = w[j]
            for c in range(Ev):
                out[idx + (i, c)] = math.fsum(w[j] * float(vi[j, c]) for j in range(S))
    return out, weights


def _as_matrix(m):
    """A mask or bias with at least two axes, so a (S,) row broadcasts like (1, S)."""
    m = np.asarray(m)
    return m.reshape((1,) * (2 - m.ndim) + m.shape) if m.ndim < 2 else m


def _pick(a, idx):
    """The (rows, cols) matrix of ``a`` at broadcast leading index ``idx``."""
    lead = a.shape[:-2]
    own = idx[len(idx) - len(lead):] if lead else ()
    return a[tuple(0 if n == 1 else i for i, n in zip(own, lead))]


def _at(m, i, j):
    """Entry (i, j) of a matrix that may be broadcast along either axis."""
    return m[0 if m.shape[0] == 1 else i, 0 if m.shape[1] == 1 else j]
