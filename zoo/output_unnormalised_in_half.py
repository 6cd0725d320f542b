"""The output summed unnormalised in the inputs' format, divided by the row's sum only at the end.

Flash-style kernels defer the softmax's division: they sum exp(s − max)·v over the keys and
divide by Σ exp(s − max) once, at the end. The running sum is up to S times the largest |v|, so
it must be kept in float32 — the kernels that keep it in the inputs' float16 (to halve register
use, or because ``p @ v`` of two float16 tensors is float16) return inf wherever V's entries
come within a factor of S of 65504. With ordinary values the answer is as accurate as the
weights-first order, so every test at unit-scale inputs passes.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="output-unnormalised-in-half",
    title="Unnormalised output sum kept in float16, divided by the row sum at the end",
    category="precision",
    symptom="nan",
    lesson="Keep the unnormalised accumulator (Σ exp(s − max)·v) in float32, or normalise the "
           "weights before multiplying by V: only the finished average is bounded by |V|.",
    source="",
    seen_in="float16 accumulation in flash-attention, whose attention results exceed 65504 on "
            "Qwen2.5 layers (https://github.com/Dao-AILab/flash-attention/issues/543)",
    caught_by=("low_precision_agreement",),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        scores = self.scores(query, key, scale)  # (N, ..., H, L, S)
        scores = scores + self.bias(attn_mask, is_causal, L, S, query)  # -inf where forbidden
        m = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # an empty row: subtract 0
        e = torch.exp(scores - m)  # (..., L, S) in [0, 1]
        total = e.sum(dim=-1, keepdim=True)  # (..., L, 1)
        if dropout_p > 0:
            e = torch.nn.functional.dropout(e, dropout_p)  # survivors scaled 1/(1-p)
        acc = e @ value  # BUG: Σ exp(s - m)·v, up to S·|v|, in value's own dtype
        return acc / torch.where(total == 0, torch.ones_like(total), total)  # (..., L, Ev)


SDPA = Sdpa()
