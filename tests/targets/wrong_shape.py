"""An SDPA-style callable that answers every call with the same three numbers."""
import torch


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return torch.zeros(3, dtype=query.dtype)
