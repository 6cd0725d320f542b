"""Heads folded into the batch with ``.view``, which needs contiguous memory.

Query, key and value usually arrive as ``x.view(B, T, H, E).transpose(1, 2)``: the right shape,
but laid out in memory as (B, T, H, E). ``.view(B * H, T, E)`` cannot fold such a tensor and
raises; ``.reshape`` would copy. Tests that build q, k and v with ``torch.randn(B, H, T, E)``
are contiguous and never see it — the model does, on its first forward pass.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="view-on-non-contiguous",
    title="Heads folded with .view on query/key/value that are transposed views",
    category="shapes",
    symptom="crash",
    lesson="Fold axes with reshape (or call .contiguous() first): view needs contiguous memory.",
    source="",
    seen_in="multi-head attention that splits heads with view(...).transpose(1, 2) and later "
            "folds them with view for a bmm; tests that only feed freshly allocated tensors",
    caught_by=("matches_loop_oracle", "causal_alignment", "gqa_head_mapping"),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = query.shape[-1] ** -0.5 if scale is None else scale
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        q = query.view(-1, L, E)  # BUG: (N·H, L, E) fails when query is a transposed view
        k = key.view(-1, S, E)  # BUG: the same for key
        scores = q @ k.transpose(-2, -1) * factor  # (N·H, L, S)
        return scores.view(query.shape[:-2] + (L, S))  # (N, ..., H, L, S)


SDPA = Sdpa()
