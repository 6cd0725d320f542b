"""HF/Mistral's window counting: each bounded side of ``window_size`` counts the current token.

The per-sequence loop, reading ``(W, 0)`` as ``sliding_window=W``: W keys, the query's own
among them, i.e. flash-attention's ``(W − 1, 0)`` (the translation Megatron-Bridge and sglang
had to add). Correct under its declared convention.
"""

import torch

from zoo import Decoy
from zoo.varlen.decoys.sequence_loop import SequenceLoop

DECOY = Decoy(
    id="varlen-sliding-window-counts-current-token",
    title="A sequence loop whose window sides count the current token (sliding_window=W)",
    technique="the loop's visibility with d - wl < j < d + wr for bounded sides: W keys on the "
    "left including the query's own",
    why_correct="it is flash-attention's inclusive window with each bounded side one smaller, "
    "the declared convention HF's sliding_window follows",
)
CONVENTIONS = {"window_counting": "counts the current token"}


class Loop(SequenceLoop):
    def visible(self, sq, sk, causal, window_size):
        d, j = self.diagonal(sq, sk), torch.arange(sk)[None, :]
        wl, wr = window_size
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            keep &= j <= d
        if wl >= 0:
            keep &= j > d - wl
        if wr >= 0:
            keep &= j < d + wr
        return keep


VARLEN = Loop()
