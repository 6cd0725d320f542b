"""A query tile stored whole: the last tile of a sequence writes past the sequence's end.

Each tile holds BLOCK_M queries; the last one of a sequence is only partly its own, and the
rows past its end belong to the next sequence (or to no sequence). Computing and storing the
whole tile without the row mask overwrites them; sequences launched in another order than the
rows are laid out leave the wrong rows behind.
"""

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import BLOCK_M, PagedTiles

BUG = Bug(
    id="varlen-tile-store-past-sequence-end",
    title="The last query tile of a sequence is stored whole, over the next sequence's rows",
    category="packing",
    symptom="silent",
    lesson="Mask a tile's loads and stores at the sequence's last row; test lengths that are "
           "not multiples of the tile.",
    source="",
    seen_in="https://github.com/Dao-AILab/flash-attention/issues/1661 (rows outside the "
            "cu_seqlens range are modified)",
    caught_by=(
        "rows_without_keys_are_zero",
        "alibi_is_a_float_bias",
        "matches_reference",
        "decode_matches_prefill",
        "per_sequence_equivalence",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "causal_diagonal_convention",
        "gradients_match_reference",
        "empty_row_convention",
        "window_counting_convention",
    ),
)


class Tiles(PagedTiles):
    def tile_rows(self, sq, m0):
        return BLOCK_M  # BUG: the whole tile, not min(BLOCK_M, sq - m0)


VARLEN = Tiles()
