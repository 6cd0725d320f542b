"""Which query may attend which key in a call, under the subject's declared conventions."""

from dataclasses import replace

import numpy as np

from reference.loop_oracle import causal_allowed


def allowed(call, alignment="top-left"):
    """Bool (..., L, S) broadcast over the call's leading dims: True where attending is allowed."""
    L, S = call.q.shape[-2], call.k.shape[-2]
    keep = np.ones((L, S), dtype=bool)
    if call.causal:
        keep = np.array([[causal_allowed(i, j, L, S, alignment) for j in range(S)]
                         for i in range(L)])
    if call.mask is not None:
        keep = keep & call.mask
    if call.bias is not None:
        keep = keep & ~np.isneginf(call.bias)
    lead = np.broadcast_shapes(call.q.shape[:-2], keep.shape[:-2])
    return np.broadcast_to(keep, lead + (L, S))


def empty_rows(call, alignment="top-left"):
    """Bool (..., L): rows with no allowed key."""
    return ~allowed(call, alignment).any(axis=-1)


def dead_keys(call, alignment="top-left", keep=None):
    """Bool shaped like K's (..., S): keys no query may attend, in every broadcast copy
    (``keep``: the (..., L, S) keys each row reads, when not just the allowed ones)."""
    keep = (allowed(call, alignment) if keep is None else keep).any(axis=-2)  # (lead..., S)
    k_lead = call.k.shape[:-2]
    if call.gqa:  # a key head serves a group of query heads: dead only if dead for all of them
        g = call.q.shape[-3] // call.k.shape[-3]
        keep = keep.reshape(keep.shape[:-2] + (call.k.shape[-3], g, keep.shape[-1])).any(-2)
    extra = keep.ndim - 1 - len(k_lead)
    keep = keep.any(axis=tuple(range(extra))) if extra > 0 else keep
    axes = tuple(i for i, n in enumerate(k_lead) if n == 1 and keep.shape[i] != 1)
    keep = keep.any(axis=axes, keepdims=True) if axes else keep
    return ~np.broadcast_to(keep, k_lead + (call.k.shape[-2],))


def explicit(call, alignment="top-left"):
    """The same call with is_causal spelled out as a mask, for a reference that knows only
    PyTorch's top-left alignment (a float mask absorbs it as -inf entries)."""
    if not call.causal:
        return call
    L, S = call.q.shape[-2], call.k.shape[-2]
    keep = np.array([[causal_allowed(i, j, L, S, alignment) for j in range(S)] for i in range(L)])
    spec = replace(call.spec, causal=False)
    if call.bias is not None:
        return replace(call, spec=spec, bias=np.where(keep, call.bias, -np.inf))
    mask = keep if call.mask is None else keep & call.mask
    return replace(call, spec=spec, mask=mask)
