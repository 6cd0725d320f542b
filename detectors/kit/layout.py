"""Calls adapted to what a kernel accepts, by the harness rather than the user: other layouts,
interleaved head groups, and E == Ev twins of E != Ev calls.

Layouts other than SDPA's (..., H, L, E).

A target declaring ``layout=BLHE`` (detectors.kit.capabilities) takes query, key and value as
(..., L, H, E), the (batch, time, heads, features) layout of flash-attn, xformers and JAX, and
answers (..., L, H, Ev). The subject sends query, key, value and the upstream gradient
transposed, and transposes the answer and the gradients back, so every detector runs unchanged.

The mask is not transposed: every (N, L, H, E) library that takes one broadcasts it against the
scores, which are (N, H, L, S) there too — ``jax.nn.dot_product_attention`` and
``keras.ops.dot_product_attention`` document mask and bias "broadcastable to (B, N, T, S)",
xformers' ``attn_bias`` is (B, H, Mq, Mk) — so it goes as SDPA's.
"""

from dataclasses import replace

import numpy as np

from detectors.kit.calls import Result


def heads_last(a):
    """(..., H, L, E) as (..., L, H, E): the (batch, time, heads, features) layout."""
    return np.ascontiguousarray(np.swapaxes(a, -3, -2))


def swapped_back(result):
    """An answer in the (..., L, H, E) layout back in (..., H, L, E): out and gradients."""
    def back(a):
        return np.ascontiguousarray(np.swapaxes(a, -3, -2)) \
            if isinstance(a, np.ndarray) and a.ndim >= 3 else a

    out = result.values[0]
    grads = result.grads and {n: back(g) if n in ("query", "key", "value") else g
                              for n, g in result.grads.items()}
    return replace(result, values=(back(out),) + tuple(result.values[1:]), grads=grads)

def interleaving(Hq, Hk):
    """The query-head order that makes a kernel grouping heads *interleaved* (query head j reads
    key/value head j mod Hk) compute SDPA's contiguous grouping (head h reads h // (Hq/Hk)):
    sent head j is the caller's head (j mod Hk)·g + j // Hk, g = Hq / Hk, so it reads the
    key/value head the caller's head does. Its inverse puts the answer's heads back."""
    g = Hq // Hk
    order = np.array([(j % Hk) * g + j // Hk for j in range(Hq)])
    return order, np.argsort(order)


def heads_in(a, order):
    """``a`` with its head axis (-3) in ``order``; an array without a head axis of that size
    (a mask broadcast over heads) as it is."""
    if isinstance(a, np.ndarray) and a.ndim >= 3 and a.shape[-3] == len(order):
        return np.ascontiguousarray(a[..., order, :, :])
    return a


def regrouped_back(result, inverse):
    """The answer of a call sent with its query heads reordered, in the caller's order: out,
    and the gradients of the query and of a per-head mask (key and value heads never move)."""
    grads = result.grads and {n: heads_in(g, inverse) if n in ("query", "attn_mask") else g
                              for n, g in result.grads.items()}
    out = result.values[0]
    return replace(result, values=(heads_in(out, inverse),) + tuple(result.values[1:]),
                   grads=grads)


def pad_last(a, n):
    """``a`` with zeros appended on its last axis up to size ``n``."""
    return np.concatenate([a, np.zeros(a.shape[:-1] + (n - a.shape[-1],))], axis=-1)


def twin(q, k, v):
    """(q, k, v, the answer's width) with E == Ev: the narrower side padded with zeros.
    Zero value columns give zero output columns; zero query/key columns add 0 to every score."""
    E, Ev = q.shape[-1], v.shape[-1]
    if Ev < E:
        return q, k, pad_last(v, E), Ev
    return pad_last(q, Ev), pad_last(k, Ev), v, Ev


def cropped(result, E, Ev, q_factor=1.0):
    """A padded call's answer cut back to the call that was asked: out to Ev, gradients to
    their arguments' widths (and the query's multiplied by the factor Q was sent times)."""
    out = result.values[0]
    values = (out[..., :Ev] if np.ndim(out) else out,) + tuple(result.values[1:])
    grads = result.grads
    if grads:
        widths = {"query": E, "key": E, "value": Ev}
        grads = {n: (g[..., :widths[n]] * (q_factor if n == "query" else 1.0)
                     if n in widths and isinstance(g, np.ndarray) and g.ndim else g)
                 for n, g in grads.items()}
    return replace(result, values=values, grads=grads)


def bare(values):
    """Bare values as a Result, for :func:`cropped`."""
    return Result(values, ())
