"""SDPA under the other convention for a query with no allowed key: the uniform average.

``uniform`` masks by replacing a forbidden score with the dtype's most negative finite number
(``torch.where``, as ``jax.nn.dot_product_attention`` and keras apply a mask with a large
negative fill): a row with an allowed key gives its forbidden keys exactly 0 (the fill minus the
row's largest score underflows), and a row with none softmaxes equal scores, weight 1/S on
every key, its output the mean of the values. The fill replaces the score rather than being
added to it, so such a row is constant in query and keys and its gradient is the uniform
row's. Correct under ``--empty-rows uniform``; ``nan_rows`` gives such a row NaN, which no
convention allows. It shares no code with attnzoo's oracle, which writes the uniform rows out
as the mean of V (``detectors.kit.conventions``).
"""

import math

import torch


def _attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, fill):
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa:  # each key/value head serves a group of query heads
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], dim=-3)
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query * factor) @ key.transpose(-2, -1)  # (..., L, S)
    keep = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if is_causal:
        keep = keep.tril()  # top-left: query i sees keys j <= i
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask
        else:
            scores = scores + attn_mask
            keep = keep & ~torch.isneginf(attn_mask)
    scores = torch.where(keep, scores, fill(scores.dtype))  # (..., L, S)
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)
    return weights @ value  # (..., L, Ev)


def uniform(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
            enable_gqa=False):
    return _attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                   lambda dtype: torch.finfo(dtype).min)


def nan_rows(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
    return _attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                   lambda dtype: -math.inf)  # a row of −∞ only: 0/0
