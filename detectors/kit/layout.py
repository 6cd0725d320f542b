"""Layouts other than SDPA's (..., H, L, E), adapted by the harness rather than the user.

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
