"""A causal mask compared on positions made in the inputs' own float format.

``i = torch.arange(L, dtype=q.dtype)`` looks harmless: positions are small integers. But a
format holds integers exactly only up to 2 ** (significand bits): 256 in bfloat16, 2048 in
float16. Past that, arange's values round together — in bfloat16 259 becomes 260 — and
``j <= i`` lets query 259 see key 260, the token it is meant to predict. Every test shorter
than 257 tokens, or run in float32, passes; a bfloat16 model leaks the future on every long
prompt.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="causal-positions-in-input-dtype",
    title="Causal mask compares positions made in the inputs' float format",
    category="masking",
    symptom="silent",
    lesson="Make positions as integers (torch.arange(L) is int64) or build the mask with "
           "tril; a float format holds integers exactly only up to 256 (bfloat16) or 2048 "
           "(float16).",
    source="",
    seen_in="lucidrains/local-attention, whose float16 positions leaked future tokens past "
            "2048 (https://github.com/lucidrains/local-attention/issues/12, from "
            "https://github.com/pytorch/pytorch/issues/81926); bfloat16 arange rounds past 256 "
            "(https://github.com/pytorch/pytorch/issues/137774)",
    caught_by=("causality", "low_precision_gradients"),
    depth="standard",
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = super().bias(attn_mask, False, L, S, query)  # (..., L, S): the mask alone
        if not is_causal:
            return bias
        i = torch.arange(L, dtype=query.dtype)[:, None]  # BUG: positions rounded in bfloat16
        j = torch.arange(S, dtype=query.dtype)[None, :]  # (1, S)
        return bias.masked_fill(j > i, -math.inf)  # top-left: query i sees keys j <= i


SDPA = Sdpa()
