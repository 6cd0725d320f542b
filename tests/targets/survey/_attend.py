"""The attention math the fake libraries share: scores, a large negative fill where a mask
forbids a key (as JAX and keras fill), softmax, weights @ V. Written here, not the reference's.
The fakes load it by path (``sibling``): the worker imports a target file alone."""

import math

import torch

FILL = -1e30  # finite: a row with no allowed key averages every value, as a large fill gives


def attend(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        group = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(group, dim=-3)
        value = value.repeat_interleave(group, dim=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., L, S)
    if is_causal:
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~allowed, FILL)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, FILL)
    elif attn_mask is not None:  # a key at -inf is forbidden: filled, not added to
        scores = (scores + attn_mask.clamp(min=FILL)).masked_fill(attn_mask == -math.inf, FILL)
    return torch.softmax(scores, dim=-1) @ value  # (..., L, Ev)

