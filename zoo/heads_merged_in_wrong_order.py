"""Heads folded into the batch, then unfolded with the axes in the wrong order.

Batched matmul wants 3-D tensors, so the heads go into the batch: (N, H, L, E) becomes
(N·H, L, E), `bmm` does the work, and the output is unfolded again. The unfold is copied from
the head *split* every multi-head module has — `x.reshape(N, L, H, d).transpose(1, 2)`, right
for a (N, L, H·d) projection — but the bmm output is laid out (N·H, L, Ev), heads first. Read as
(N, L, H, Ev) it cuts each head's rows into pieces and deals them out to the wrong heads and
positions. Every output row is still a valid attention row, just in the wrong place; with one
head, or one query, the order cannot go wrong, so small tests pass.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="heads-merged-in-wrong-order",
    title="Output of (N·H, L, Ev) bmm unfolded as (N, L, H, Ev): heads and positions scrambled",
    category="shapes",
    symptom="silent",
    lesson="Unfold with the inverse of the fold: (N·H, L, Ev) goes back to (N, H, L, Ev).",
    source="",
    seen_in="hand-written multi-head attention that folds heads into the batch for bmm and "
            "reuses the split-heads idiom reshape(N, L, H, d).transpose(1, 2) to unfold them",
    caught_by=(
        "causal_alignment", "gqa_head_mapping", "matches_loop_oracle", "output_is_weighted_values",
        "weights_are_distributions", "permutation_equivariance", "causality", "head_independence",
        "queries_are_independent", "empty_rows_are_zero",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(
        self,
        query,
        key,
        value,
        attn_mask=None,
        dropout_p=0.0,
        is_causal=False,
        scale=None,
        enable_gqa=False,
    ):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H, S, E|Ev)
        lead = query.shape[:-2]  # (N, ..., H)
        Ev = value.shape[-1]
        q = query.reshape(-1, L, E)  # (N·…·H, L, E): heads folded into the batch
        k = key.expand(*lead, S, E).reshape(-1, S, E)  # (N·…·H, S, E)
        v = value.expand(*lead, S, Ev).reshape(-1, S, Ev)  # (N·…·H, S, Ev)
        factor = 1 / math.sqrt(E) if scale is None else scale
        scores = torch.bmm(q, k.transpose(1, 2)) * factor  # (N·…·H, L, S)
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S)
        scores = scores + bias.expand(*lead, L, S).reshape(-1, L, S)  # -inf where forbidden
        weights = self.softmax(scores)  # (N·…·H, L, S), empty rows are 0
        if dropout_p > 0:
            weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
        out = torch.bmm(weights, v)  # (N·…·H, L, Ev), laid out heads first
        out = out.reshape(*lead[:-1], L, lead[-1], Ev)  # BUG: H-major data read as (…, L, H, Ev)
        return out.transpose(-3, -2)  # (N, …, H, L, Ev): right shape, rows in the wrong places


SDPA = Sdpa()
