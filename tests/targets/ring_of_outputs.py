"""Correct attention written into a ring of 32 output buffers per shape, a view of one returned
each call (as a kernel that reuses its workspaces, or a CUDA graph's static outputs): an answer
the caller holds is overwritten once 32 more calls of its shape have been made."""

import torch
import torch.nn.functional as F

RING = 32
_buffers, _turn = {}, {}


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                         dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                         enable_gqa=enable_gqa)
    if out.requires_grad:
        return out
    shape = (tuple(out.shape), out.dtype)
    ring = _buffers.setdefault(shape, [torch.empty(out.shape, dtype=out.dtype)
                                       for _ in range(RING)])
    turn = _turn[shape] = (_turn.get(shape, -1) + 1) % RING
    ring[turn].copy_(out)
    return ring[turn]
