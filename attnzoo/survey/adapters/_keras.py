"""keras.ops.dot_product_attention on one backend per worker process.

Keras reads KERAS_BACKEND once, at import; the survey gives every implementation its own
worker, so each keras adapter sets the variable before the first import and refuses to run
if keras was already imported with another backend.
"""

import os


def ops(backend):
    os.environ["KERAS_BACKEND"] = backend
    import keras

    if keras.backend.backend() != backend:
        raise RuntimeError(f"keras was imported with the {keras.backend.backend()} backend; "
                           f"this adapter needs {backend}: run it in its own process")
    return keras.ops


def attend(backend, query, key, value, attn_mask, dropout_p, is_causal, scale, to_array):
    """The call in keras' (N, L, H, E) layout, which the harness sends (``layout=BLHE``); a
    bool mask as ``mask``, a float one as ``bias``."""
    import torch

    from attnzoo.survey.adapters import _convert

    ops_ = ops(backend)
    if dropout_p > 0:
        raise NotImplementedError("keras.ops.dot_product_attention takes no dropout")
    q, k, v = (to_array(t) for t in (query, key, value))  # (N, L, H, E)
    m = to_array(_convert.rank4(attn_mask)) if attn_mask is not None else None
    is_bool = attn_mask is not None and attn_mask.dtype == torch.bool
    return ops_.dot_product_attention(q, k, v, bias=None if is_bool else m,
                                      mask=m if is_bool else None, scale=scale,
                                      is_causal=is_causal, flash_attention=False)
