"""SDPA as it is often first written: right everywhere except a query that every key is masked
from, whose softmax over −∞ alone is 0/0 = NaN (the contract asks for zeros there)."""

import math

import torch


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa:  # each key/value head serves a group of query heads
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], dim=-3)
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query * factor) @ key.transpose(-2, -1)  # (..., L, S)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, -math.inf)
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    weights = torch.softmax(scores, dim=-1)  # a row of −∞ only: NaN
    weights = torch.nn.functional.dropout(weights, dropout_p)
    return weights @ value  # (..., L, Ev)
