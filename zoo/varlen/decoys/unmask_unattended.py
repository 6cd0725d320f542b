"""HF's ``_unmask_unattended`` convention: a row that sees no key attends every key instead.

The per-sequence loop, with a row whose mask hides every key given its sequence's whole,
unmasked scores (transformers does this so that SDPA's memory-efficient path gives no NaN).
Correct under its declared convention; every row that sees a key is the contract's.
"""

import math

import torch

from zoo import Decoy
from zoo.varlen.decoys.sequence_loop import SequenceLoop

DECOY = Decoy(
    id="varlen-unmask-unattended",
    title="A sequence loop whose fully masked rows attend every key (HF's _unmask_unattended)",
    technique="cap, bias and mask as the loop writes them; a row the mask empties keeps its "
    "unmasked scores",
    why_correct="rows that see a key are masked exactly; an empty row is the declared "
    "convention's average over every key of its sequence",
)
CONVENTIONS = {"empty_rows": "unmasked"}


class Loop(SequenceLoop):
    def scores(self, s, keep, softcap, bias):
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        if bias is not None:
            s = s + bias
        empty = ~keep.any(dim=-1, keepdim=True)  # (sq, 1) rows the mask leaves nothing
        return torch.where(empty, s, s.masked_fill(~keep, -math.inf))


VARLEN = Loop()
