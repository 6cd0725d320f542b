"""Softmax's division deferred to the end, with the unnormalised sum kept in float32.

Flash-style kernels sum exp(s − max)·v over the keys and divide by Σ exp(s − max) once, at the
end. That order is correct as long as the running sum lives in a format with room for it: up to
S times the largest |v|. Here it is float32 for every input format below float64 (float64 for
float64), and only the finished average, bounded by |V|, is cast back to the inputs' dtype. The
causal mask compares integer positions, exact at every length.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Decoy

DECOY = Decoy(
    id="deferred-division",
    title="Deferred softmax division, the unnormalised sum kept in float32",
    technique="exp(s − max) @ V accumulated in float32 (float64 for float64 inputs), divided by "
    "the row's sum at the end and cast back; the causal mask from int64 positions",
    why_correct="the unnormalised sum is at most S·max|v|, far inside float32's range for any "
    "float16 or bfloat16 V, and integer positions compare exactly at every length",
)


class DeferredDivision(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = super().bias(attn_mask, False, L, S, query)  # (..., L, S): the mask alone
        if not is_causal:
            return bias
        i = torch.arange(L)[:, None]  # (L, 1) int64 positions
        j = torch.arange(S)[None, :]  # (1, S)
        return bias.masked_fill(j > i, -math.inf)  # top-left: query i sees keys j <= i

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        scores = self.scores(query, key, scale)  # (N, ..., H, L, S)
        scores = scores + self.bias(attn_mask, is_causal, L, S, query)  # -inf where forbidden
        wide = torch.float64 if value.dtype == torch.float64 else torch.float32
        m = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # an empty row: subtract 0
        e = torch.exp((scores - m).to(wide))  # (..., L, S) in [0, 1]
        total = e.sum(dim=-1, keepdim=True)  # (..., L, 1)
        if dropout_p > 0:
            e = torch.nn.functional.dropout(e, dropout_p)  # survivors scaled 1/(1-p)
        acc = e @ value.to(wide)  # (..., L, Ev): up to S·max|v|, room to spare in float32
        out = acc / torch.where(total == 0, torch.ones_like(total), total)
        return out.to(value.dtype)


SDPA = DeferredDivision()
