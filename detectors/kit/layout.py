"""Layouts other than SDPA's (..., H, L, E), adapted by the harness rather than the user.

A target declaring ``layout=BLHE`` (detectors.kit.capabilities) takes query, key and value as
(..., L, H, E), the (batch, time, heads, features) layout of flash-attn, xformers and JAX, and
answers (..., L, H, Ev). The subject sends every call transposed, its mask and upstream gradient
alike, and transposes the answer and the gradients back, so every detector runs unchanged.
"""

from dataclasses import replace

import numpy as np


def heads_last(a):
    """(..., H, L, E) as (..., L, H, E): the (batch, time, heads, features) layout."""
    return np.ascontiguousarray(np.swapaxes(a, -3, -2))


def mask_heads_last(mask):
    """A mask broadcast against (..., H, L, S) as one broadcast against (..., L, H, S): an
    (L, S) mask gains a head axis of 1, a longer one swaps its head and query axes."""
    if mask.ndim < 2:
        return mask
    if mask.ndim == 2:
        return np.ascontiguousarray(mask[..., :, None, :])  # (L, 1, S)
    return heads_last(mask)


def swapped_back(result):
    """An answer in the (..., L, H, E) layout back in (..., H, L, E): out and gradients."""
    def back(a):
        return np.ascontiguousarray(np.swapaxes(a, -3, -2)) \
            if isinstance(a, np.ndarray) and a.ndim >= 3 else a

    out = result.values[0]
    grads = result.grads and {n: back(g) if n in ("query", "key", "value") else g
                              for n, g in result.grads.items()}
    return replace(result, values=(back(out),) + tuple(result.values[1:]), grads=grads)
