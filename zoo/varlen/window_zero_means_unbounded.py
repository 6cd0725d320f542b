"""A window side of 0 read as "no bound": ``if wr > 0`` where ``wr >= 0`` was meant.

−1 means unbounded, 0 means "no key on that side". A test of the bound with ``(L, 0)`` and
``causal=True`` never notices, because the causal mask hides the future anyway; without the
causal flag the query attends to every later key.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-window-zero-means-unbounded",
    title="A window side of 0 is taken for unbounded: (wl, 0) without causal sees the future",
    category="masking",
    symptom="silent",
    lesson="Only a negative window side is unbounded; 0 keeps no key on that side. Test (L, 0) "
           "without the causal flag.",
    source="",
    seen_in="https://github.com/jax-ml/jax/pull/39576 (a non-causal (L, 0) window attends to the "
            "whole future)",
    caught_by=(
        "matches_reference",
        "window_is_a_key_slice",
        "rows_without_keys_are_zero",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def visible(self, sq, sk, causal, window_size):
        d, j = self.diagonal(sq, sk), torch.arange(sk)[None, :]
        wl, wr = window_size
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            keep &= j <= d
        if wl > 0:  # BUG: 0 is a bound, not "unbounded"
            keep &= j >= d - wl
        if wr > 0:  # BUG
            keep &= j <= d + wr
        return keep


VARLEN = Loop()
