"""Masked scores filled with a finite −5·10⁴ instead of −∞.

Kernels that avoid infinities use a large negative sentinel. A visible key still wins, but a
row that sees no key now averages every key of its tiles, padding included, instead of being 0.
"""

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-mask-fill-finite-sentinel",
    title="Masked scores set to -5e4, so a row with no visible key averages hidden ones",
    category="masking",
    symptom="silent",
    lesson="Mask with -inf and guard the empty row; a finite sentinel is still a score.",
    source="",
    seen_in="https://github.com/flashinfer-ai/flashinfer/issues/4267 (the -inf sentinel is a "
            "finite -5e4)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "window_is_a_key_slice",
        "causal_diagonal_convention",
        "rows_without_keys_are_zero",
        "gradients_match_reference",
        "empty_row_convention",
    ),
)


class Tiles(PagedTiles):
    fill = -5e4  # BUG: a finite score, not -inf


VARLEN = Tiles()
