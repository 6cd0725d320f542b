"""Key positions taken from the physical block: ``page·block_size + slot`` instead of
``t·block_size + slot`` for the t-th page of the sequence.

The kernel masks and biases by a position it computes from where the page lies in memory.
While a sequence's pages happen to be blocks 0, 1, 2, … it is right; once the allocator hands
out blocks in another order the output depends on placement.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-page-position-from-physical-block",
    title="Key positions computed from the physical block id: output depends on page placement",
    category="paging",
    symptom="silent",
    lesson="A key's position is its page's index in the block table times the block size plus "
           "its slot; permute the physical blocks in a test.",
    source="",
    seen_in="https://github.com/pytorch/pytorch/issues/182593 (paged FlexAttention output "
            "depends on the physical KV placement)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "lse_matches_output",
        "page_placement_invariance",
        "padding_is_never_read",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
    ),
)


class Tiles(PagedTiles):
    def positions(self, page, t, size):
        return page * size + torch.arange(size)  # BUG: the physical block, not the t-th page


VARLEN = Tiles()
