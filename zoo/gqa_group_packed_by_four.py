"""GQA query heads packed four to a tile: groups larger than four read the wrong key head.

A kernel that packs the query heads of one group into a tile of four rows, and derives the
key/value head from the packed index as h // 4 (wrapped to the key heads there are), is right
for groups of 1 to 4 — every group the quick battery has — and wrong for groups of 6, 8 or
16, where query head h should read key/value head h // g.
"""

import torch

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="gqa-group-packed-by-four",
    title="GQA key/value head derived from a pack of four query heads",
    category="heads",
    symptom="silent",
    lesson="Derive the key/value head from the real group size g = H_q / H_kv, and test "
           "groups larger than any tile the kernel packs.",
    source="",
    seen_in="GQA kernels that pack a group's query heads into a fixed tile (pack-GQA in "
            "fused kernels, vectorised decode kernels with a fixed column count) and compute "
            "the key/value head from the tile rather than from the group",
    caught_by=("gqa_head_mapping", "matches_loop_oracle"),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def kv_for_query_heads(self, query, key, value):
        group = query.shape[-3] // key.shape[-3]
        pack = min(group, 4)  # BUG: h // 4 is not h // g once g > 4
        heads = torch.arange(query.shape[-3], device=query.device) // pack % key.shape[-3]
        return key.index_select(-3, heads), value.index_select(-3, heads)


SDPA = Sdpa()
