"""torch's SDPA, refusing any float64 call: a float32 kernel, checked with --dtype float32."""

import torch


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    for name, a in (("query", query), ("key", key), ("value", value), ("attn_mask", attn_mask)):
        if a is not None and a.dtype == torch.float64:
            raise TypeError(f"{name} is float64: this kernel takes float32 only")
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)
