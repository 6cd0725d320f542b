"""The bottom-right offset ``sk − sq`` held unsigned: with more queries than keys it wraps.

When sq > sk the offset is negative; stored in an unsigned integer it becomes about 2³², every
diagonal lies past the last key, and the causal mask (and a window) keeps everything. Square
tests and decode (sq < sk) never make the offset negative.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-causal-offset-unsigned-wraps",
    title="The causal offset sk - sq is unsigned: with sq > sk it wraps and the mask vanishes",
    category="masking",
    symptom="silent",
    lesson="Keep the diagonal's offset signed; test causal masks with more queries than keys.",
    source="",
    seen_in="https://github.com/pytorch/pytorch/pull/193632 (the memory-efficient kernel's "
            "bottom-right offset was unsigned and wrapped, disabling the mask)",
    caught_by=(
        "alibi_is_a_float_bias",
        "causal_diagonal_convention",
        "matches_reference",
        "rows_without_keys_are_zero",
        "window_is_a_key_slice",
        "gradients_match_reference",
        "empty_row_convention",
    ),
)


class Loop(SequenceLoop):
    def visible(self, sq, sk, causal, window_size):
        offset = (sk - sq) % 2**32  # BUG: an unsigned offset wraps when sq > sk
        d, j = torch.arange(sq)[:, None] + offset, torch.arange(sk)[None, :]
        wl, wr = window_size
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            keep &= j <= d
        if wl >= 0:
            keep &= j >= d - wl
        if wr >= 0:
            keep &= j <= d + wr
        return keep


VARLEN = Loop()
