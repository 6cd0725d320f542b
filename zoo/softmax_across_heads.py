"""Softmax over heads and keys together: the heads compete for one distribution.

With the einsum layout `scores = einsum("nlhe,nshe->nlhs", q, k)` the scores of one query
sit in an (H, S) block, and flattening the last two axes before the softmax looks like a
harmless way to get a plain row. It makes one distribution over H·S entries per query: each
head's weights now sum to its share of the total, not to 1, and a head with large scores
starves the others. Every weight is still non-negative, masked keys still get 0, and with a
single head — the usual small test — the result is exactly right.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="softmax-across-heads",
    title="Scores normalised jointly over heads and keys, (N, L, H·S), instead of per head",
    category="heads",
    symptom="silent",
    lesson="Normalise each head's row of scores on its own: softmax over the key axis only.",
    source="",
    seen_in="multi-head attention written with einsum in a (N, L, H, S) layout, where the "
            "head and key axes are flattened before softmax(dim=-1); softmax over dim=(-2, -1)",
    caught_by=(
        "gqa_head_mapping", "matches_loop_oracle", "weights_are_distributions",
        "head_independence",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def softmax(self, x):
        H, L, S = x.shape[-3:]  # x: (N, ..., H, L, S)
        per_query = x.transpose(-3, -2).flatten(-2)  # BUG: (N, ..., L, H·S): one row, all heads
        weights = super().softmax(per_query)  # (N, ..., L, H·S), sums to 1 across the heads
        return weights.unflatten(-1, (H, S)).transpose(-3, -2)  # (N, ..., H, L, S)


SDPA = Sdpa()
