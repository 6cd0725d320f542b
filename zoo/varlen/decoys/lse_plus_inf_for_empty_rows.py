"""Flash-attention 2's non-split convention: a row that sees no key is 0 with LSE +∞.

The tiled kernel over pages, storing +∞ as the LSE of a row whose normaliser is 0 (as FA2's
``softmax.h`` does outside its split path). Correct under its declared convention: the output
is the contract's, and +∞ marks exactly the rows that see nothing.
"""

import math

import torch

from zoo import Decoy
from zoo.varlen.decoys.paged_tiles import PagedTiles

DECOY = Decoy(
    id="varlen-lse-plus-inf-for-empty-rows",
    title="Tiles over pages that give a row with no visible key LSE +inf (FA2's non-split path)",
    technique="the paged online-softmax kernel; the store writes +inf as the LSE of a row whose "
    "normaliser stayed 0",
    why_correct="the output of every row and the LSE of every row that sees a key are the "
    "contract's; +inf marks the empty rows, the declared convention",
)
CONVENTIONS = {"empty_rows": "lse +inf"}  # what a Target of this kernel declares


class Tiles(PagedTiles):
    def store(self, out, lse, start, rows, o, l):
        out[start:start + rows] = o
        lse[:, start:start + rows] = torch.where(torch.isneginf(l), math.inf, l)


VARLEN = Tiles()
