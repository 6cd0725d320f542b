"""Grouped key/value heads tiled with `repeat` instead of `repeat_interleave`.

With H_q query heads and H_kv key/value heads, each kv head serves g = H_q / H_kv consecutive
query heads: kv head j → query heads j·g … j·g+g−1, so query head h reads kv head h // g.
`np.repeat` does exactly that; `torch.Tensor.repeat` does not — it tiles, giving
[0, 1, …, H_kv−1, 0, 1, …], so query head h reads kv head h % H_kv. Both produce the right
shape and equally plausible attention. With one kv head (multi-query attention) or one group
(g = 1) the two agree, so those tests pass; with grouped heads and pretrained weights the model
just gets worse.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="gqa-repeat-instead-of-interleave",
    title="GQA key/value heads tiled (head h reads h % H_kv) instead of interleaved (h // g)",
    category="heads",
    symptom="silent",
    lesson="Expand kv heads with repeat_interleave: query head h reads kv head h // g.",
    source="",
    seen_in="grouped-query attention ported from NumPy (np.repeat interleaves) to torch "
            "(Tensor.repeat tiles); loading pretrained GQA checkpoints into a re-implementation",
    caught_by=(
        "gqa_head_mapping", "matches_loop_oracle", "output_is_weighted_values",
        "head_independence",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def share_kv_heads(self, query, key, value):
        group = query.shape[-3] // key.shape[-3]  # g query heads per key/value head
        tiles = (1,) * (key.dim() - 3) + (group, 1, 1)  # repeat g times along the head axis
        key = key.repeat(tiles)  # BUG: (N, ..., H_q, S, E) tiled: head h reads kv head h % H_kv
        value = value.repeat(tiles)  # BUG: (N, ..., H_q, S, Ev) tiled the same way
        return key, value


SDPA = Sdpa()
