"""An online softmax without the empty-row guard: a row that sees no key is 0/0 = NaN.

The running maximum starts at −∞; when every score of a tile is −∞ the shift is −∞ too, and
``exp(−∞ − (−∞))`` is NaN. Random masks rarely empty a whole row, padding and causal masks with
sq > sk do.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-empty-row-nan",
    title="Online softmax shifted by a -inf maximum: rows that see no key are NaN",
    category="masking",
    symptom="nan",
    lesson="Shift by 0 while a row has seen no key, and leave it at 0 with LSE -inf.",
    source="",
    seen_in="https://github.com/pytorch/pytorch/issues/103749 (NaN output for fully masked rows)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "page_placement_invariance",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "causal_diagonal_convention",
        "rows_without_keys_are_zero",
        "gradients_match_reference",
        "empty_row_convention",
    ),
)


class Tiles(PagedTiles):
    def update(self, m, l, acc, s, vt):
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)  # BUG: -inf - (-inf) = NaN on a row with no visible key
        alpha = torch.exp(m - m_new)
        return m_new, l * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ vt[:, None]


VARLEN = Tiles()
