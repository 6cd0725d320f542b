"""Correct attention whose grouped query heads are interleaved: key/value heads are tiled
(query head j reads key/value head j mod H_kv), as x-transformers' Attend repeats them. It
declares the convention; without the declaration SDPA's grouping (h // (H_q / H_kv)) fails."""

import torch.nn.functional as F

ATTNZOO_UNSUPPORTED = ("gqa=interleaved",)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    groups = query.shape[-3] // key.shape[-3] if query.ndim >= 3 else 1
    if enable_gqa and groups > 1:  # (..., Hk, S, E) -> (..., Hk·g, S, E), tiled
        key = key.repeat(*([1] * (key.ndim - 3)), groups, 1, 1)
        value = value.repeat(*([1] * (value.ndim - 3)), groups, 1, 1)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          dropout_p=dropout_p, is_causal=is_causal, scale=scale)
