"""A per-example mask repeated over heads in the wrong order for a folded batch.

Kernels built on ``bmm`` fold batch and heads into one axis: ``q.reshape(N * H, L, E)`` puts
item n, head h at index n·H + h (batch-major). The mask must be folded the same way —
``mask.repeat_interleave(H, dim=0)`` on an (N, L, S) mask. ``mask.repeat(H, 1, 1)`` looks the
same and has the same shape, but stacks H copies of the whole batch (head-major, h·N + n), so
item n, head h gets the mask of item (n·H + h) mod N. A mask shared by every item (causal,
(L, S)) is unaffected and so is a batch of one; per-example padding masks land on the wrong
items and nothing complains. Here the mask is first expanded to (N, H, L, S) so per-head masks
work too, then flattened heads first: for an (N, 1, L, S) mask that is exactly repeat(H, 1, 1).
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="mask-repeated-in-wrong-order",
    title="Mask folded head-major (repeat) while q is folded batch-major (reshape)",
    category="masking",
    symptom="silent",
    lesson="Fold the mask batch-major, as q: repeat_interleave(H, dim=0), not repeat(H, 1, 1).",
    source="",
    seen_in="code that turns per-example padding masks into the (N·num_heads, L, S) attn_mask "
            "nn.MultiheadAttention accepts, and hand-written bmm attention kernels; "
            "repeat and repeat_interleave are easy to confuse",
    caught_by=(
        "gqa_head_mapping", "matches_loop_oracle", "weights_are_distributions",
        "batch_consistency", "mask_poisoning", "empty_rows_are_zero", "low_precision_agreement",
        "correct_gradients",
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
        *lead, H, L, E = query.shape
        S, Ev = key.shape[-2], value.shape[-1]
        N = math.prod(lead)  # every leading axis folds into the batch
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H, S, E|Ev)
        q = query.reshape(N * H, L, E)  # (N·H, L, E): item n, head h at n·H + h
        k = key.reshape(N * H, S, E)  # (N·H, S, E)
        v = value.reshape(N * H, S, Ev)  # (N·H, S, Ev)
        factor = 1 / math.sqrt(E) if scale is None else scale
        scores = torch.bmm(q, k.transpose(1, 2)) * factor  # (N·H, L, S)
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        bias = bias.expand(*lead, H, L, S).reshape(N, H, L, S)  # (N, H, L, S)
        bias = bias.transpose(0, 1).reshape(N * H, L, S)  # BUG: h·N + n, as mask.repeat(H, 1, 1)
        weights = self.softmax(scores + bias)  # (N·H, L, S), empty rows are 0
        if dropout_p > 0:
            weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
        out = torch.bmm(weights, v)  # (N·H, L, Ev)
        return out.reshape(*lead, H, L, Ev)  # (N, ..., H, L, Ev)


SDPA = Sdpa()
