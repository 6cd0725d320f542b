"""A finite fill: masked scores set to the dtype's lowest value, not −∞ (HF eager's
``finfo.min``), so a row that sees no key weighs every key of its sequence equally.

The per-sequence loop with ``masked_fill(~keep, finfo.min)``: a row with a visible key is exact
(the fill's exp underflows to 0), and an empty row's scores are all the fill, whose softmax is
uniform. Correct under its declared convention, "uniform"; a fill such as −5·10⁴ is not: an
empty row's scores keep their differences, and a tiled kernel's fill reaches its padding
(``mask_fill_finite_sentinel``).
"""

import torch

from zoo import Decoy
from zoo.varlen.decoys.sequence_loop import SequenceLoop

DECOY = Decoy(
    id="varlen-finite-fill",
    title="A sequence loop that fills masked scores with finfo.min (HF eager's fill)",
    technique="cap, bias, then masked_fill with the work dtype's lowest finite value",
    why_correct="a visible key outweighs the fill by more than any score, so masked keys get "
    "weight 0; an empty row is the declared convention's mean of its sequence's values",
)
CONVENTIONS = {"empty_rows": "uniform"}


class Loop(SequenceLoop):
    def fill(self, dtype):
        return torch.finfo(dtype).min


VARLEN = Loop()
