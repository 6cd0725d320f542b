"""Masking with −1e9, which float16 cannot hold.

−1e9 is the "minus infinity" of a great deal of transformer code, and with the usual fix for
rows that padding closes completely (zero the masked weights after softmax) it is exact in
float64, float32 and bfloat16: e^(−1e9) is 0 and an empty row comes out 0. Float16 tops out at
65504. ``masked_fill`` checks that its value fits the tensor's dtype, so the first float16 call
with a mask raises "value cannot be converted to type c10::Half without overflow". Every test in
float32 passes; the crash waits for the day someone turns on half precision.
"""

import math

import torch

from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

NEG = -1e9  # "minus infinity", as much code writes it

BUG = Bug(
    id="mask-fill-overflows-half",
    title="masked_fill with −1e9 raises in float16",
    category="precision",
    symptom="crash",
    lesson="Fill with −∞ (or torch.finfo(dtype).min), never a constant that the lowest "
           "precision cannot represent.",
    source="",
    seen_in="scores.masked_fill(mask == 0, -1e9) in tutorial transformer code, and causal "
            "biases filled with a large constant, breaking when the model is run in float16",
    caught_by=("dtype_follows_input", "low_precision_agreement"),
)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, NEG)  # BUG: -1e9 overflows float16: raises
        weights = self.softmax(scores)  # (..., T_q, T_k), an empty row is uniform here
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)  # ... and 0 here, as the contract wants
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:  # top-left causal rows always keep key 0, so a finite fill is exact
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            bias = bias.masked_fill(~allowed, NEG)  # BUG: -1e9 overflows float16: raises
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, bias, float("-inf"))  # (..., L, S): False -> -inf
        return bias + attn_mask  # a float mask is added to the scores


TORCH = Torch()
SDPA = Sdpa()
