"""SDPA in the (batch, time, heads, features) layout: query (N, L, H, E), answer (N, L, H, Ev).

Like flash-attn, xformers and JAX it takes heads after time, and, like xformers and JAX, a mask
broadcastable to the (N, H, L, S) scores. Correct in that layout: called as (N, H, L, E) it
reads heads as time. ``sdpa`` declares nothing (the caller says ``--unsupported layout=BLHE``);
``declared`` is the same function declaring its layout beside itself.
"""

import torch

_sdpa = torch.nn.functional.scaled_dot_product_attention


def _bhle(a):
    return a.transpose(-3, -2)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if query.dim() < 3:  # (L, E): no head axis, the same in either layout
        return _sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                     is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    out = _sdpa(_bhle(query), _bhle(key), _bhle(value), attn_mask=attn_mask, dropout_p=dropout_p,
                is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)  # (..., H, L, Ev)
    return _bhle(out)  # (..., L, H, Ev)


def declared(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
    return sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


declared.ATTNZOO_UNSUPPORTED = ("layout=BLHE",)
