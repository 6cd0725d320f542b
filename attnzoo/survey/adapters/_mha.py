"""torch.nn.MultiheadAttention with identity projections: only its attention core remains.

Shared by the weights-path and fast-path adapters. The conversions: heads merged into the
embedding, (N, H, L, E) → (N, L, H·E) and back (a transpose and a reshape); in_proj and
out_proj set to the identity without bias (x·I is exact in floating point, so the projections
add no rounding); the keep-convention bool mask inverted into MHA's True = masked; a mask
broadcast to (N, H, L, S) and laid out as MHA's (N·H, L, S).
"""

import torch


def module(query, dropout_p):
    """An MHA whose projections are the identity, in the query's dtype and device."""
    n_heads, head = query.shape[1], query.shape[-1]
    embed = n_heads * head
    mha = torch.nn.MultiheadAttention(embed, n_heads, dropout=dropout_p, bias=False,
                                      batch_first=True, device=query.device, dtype=query.dtype)
    with torch.no_grad():
        eye = torch.eye(embed, dtype=query.dtype, device=query.device)
        mha.in_proj_weight.copy_(torch.cat([eye, eye, eye]))  # (3·H·E, H·E)
        mha.out_proj.weight.copy_(eye)
    mha.train(dropout_p > 0)
    return mha


def merge(x):
    """(N, H, L, E) → (N, L, H·E)."""
    n, h, length, e = x.shape
    return x.transpose(1, 2).reshape(n, length, h * e)


def split(x, heads):
    """(N, L, H·E) → (N, H, L, E)."""
    n, length, he = x.shape
    return x.reshape(n, length, heads, he // heads).transpose(1, 2)


def mask(attn_mask, query, key):
    """An SDPA mask as MHA's attn_mask: (N·H, L, S), bool inverted to True = masked."""
    if attn_mask is None:
        return None
    n, h, length, s = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
    m = attn_mask.broadcast_to(n, h, length, s).reshape(n * h, length, s)  # (N·H, L, S)
    return ~m if m.dtype == torch.bool else m


def attend(query, key, value, attn_mask, dropout_p, is_causal, scale, **weights):
    """One MultiheadAttention call on SDPA-shaped inputs; ``weights`` picks the path
    (need_weights=..., average_attn_weights=...). Returns the output, (N, H, L, E)."""
    if scale is not None:  # refused, never ignored: an ignored scale would pose as a bug
        raise NotImplementedError("MultiheadAttention takes no scale")
    mha = module(query, dropout_p)
    out, _ = mha(merge(query), merge(key), merge(value), attn_mask=mask(attn_mask, query, key),
                 is_causal=is_causal, **weights)
    return split(out, query.shape[1])  # (N, H, L, E)
