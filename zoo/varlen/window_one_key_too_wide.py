"""A left window one key too wide: the lower end is ``d − wl − 1``.

HF's ``sliding_window=W`` counts the current token (flash-attention's ``(W−1, 0)``); passing W
through as the window's left side, or writing the end as exclusive, keeps one key more than the
window allows. Every test whose sequences are shorter than the window sees no difference.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-window-one-key-too-wide",
    title="The left end of the window is d - wl - 1: one key more than the window allows",
    category="masking",
    symptom="silent",
    lesson="A window (wl, wr) keeps d - wl <= j <= d + wr, both ends included: wl + wr + 1 keys; "
           "test it on sequences longer than the window.",
    source="",
    seen_in="https://github.com/huggingface/transformers/issues/39408 (window_size=(sw, sw) "
            "one too large, fixed in https://github.com/huggingface/transformers/pull/40163)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
        "window_counting_convention",
    ),
)


class Loop(SequenceLoop):
    def visible(self, sq, sk, causal, window_size):
        d, j = self.diagonal(sq, sk), torch.arange(sk)[None, :]
        wl, wr = window_size
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            keep &= j <= d
        if wl >= 0:
            keep &= j >= d - wl - 1  # BUG: keeps key d - wl - 1 as well
        if wr >= 0:
            keep &= j <= d + wr
        return keep


VARLEN = Loop()
