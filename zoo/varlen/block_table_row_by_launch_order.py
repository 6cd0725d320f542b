"""The block table read with the launch index instead of the sequence's: another sequence's
pages are attended.

The kernel launches sequences last to first; indexing the block table (or a cache batch index)
with the program's position rather than the sequence it serves reads the pages of the mirror
sequence. A batch of one, or identical sequences, hides it.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-block-table-row-by-launch-order",
    title="The block table row is the launch index, not the sequence: another sequence's pages",
    category="paging",
    symptom="silent",
    lesson="Index the block table with the sequence a program serves; test batches of unequal "
           "sequences.",
    source="",
    seen_in="https://github.com/Dao-AILab/flash-attention/issues/772 (cache_batch_idx mapped a "
            "sequence to the wrong batch row of the cache)",
    caught_by=(
        "alibi_is_a_float_bias",
        "lse_matches_output",
        "matches_reference",
        "padding_is_never_read",
        "page_placement_invariance",
        "per_sequence_equivalence",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
    ),
)


class Tiles(PagedTiles):
    def tile(self, k, v, block_table, b, k0, t, size):
        pos = t * size + torch.arange(size)
        if block_table is None:
            idx = (k0 + pos).clamp_max(k.shape[0] - 1)
            return k[idx], v[idx], pos
        row = block_table.shape[0] - 1 - b  # BUG: the launch order, last to first
        page = int(block_table[row, t])
        return k[page], v[page], self.positions(page, t, size)


VARLEN = Tiles()
