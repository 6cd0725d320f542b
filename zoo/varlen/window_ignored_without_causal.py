"""The window applied only under causal: a non-causal call attends to every key.

A kernel whose local-window mask lives in its causal branch ignores ``window_size`` when
``causal=False``; sliding-window models run causal, so their tests never leave the branch.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-window-ignored-without-causal",
    title="window_size is applied only under causal: a non-causal window keeps every key",
    category="masking",
    symptom="silent",
    lesson="Apply the window on its own, whatever causal says; test windows with causal off.",
    source="",
    seen_in="https://github.com/jax-ml/jax/issues/32300 (local_window_size ignored unless a "
            "mask is passed)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "rows_without_keys_are_zero",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
        "window_counting_convention",
    ),
)


class Tiles(PagedTiles):
    def visible(self, d, pos, causal, window_size):
        wl, wr = window_size
        keep = torch.ones(d.shape[0], pos.shape[0], dtype=torch.bool)
        if causal:  # BUG: the window is only applied in the causal branch
            keep &= pos[None, :] <= d
            if wl >= 0:
                keep &= pos[None, :] >= d - wl
            if wr >= 0:
                keep &= pos[None, :] <= d + wr
        return keep


VARLEN = Tiles()
