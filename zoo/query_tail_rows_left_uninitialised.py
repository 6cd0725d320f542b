"""The output comes from ``torch.empty`` and only full tiles of 64 query rows are written.

A generated tiled kernel launches ``L // 64`` query tiles and allocates its output with
``torch.empty`` — why zero memory the kernel is about to overwrite? When L is a multiple of 64,
as 512 is, every row is written and every answer is right. Otherwise the last L mod 64 rows
are whatever the allocator's memory held: often zeros from a fresh page, sometimes an earlier
tensor's numbers, now and then NaN. A check on one shape that is a multiple of the tile never
sees it. Here the memory is a fresh page (zeros), so that the entry gives one answer per call
and its row of the kill matrix is the same on every machine.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

TILE = 64  # query rows per tile

BUG = Bug(
    id="query-tail-rows-left-uninitialised",
    title="Output from torch.empty, written in full tiles of 64 query rows: the tail rows are "
          "garbage",
    category="generated",
    symptom="silent",
    lesson="Cover a length with ceil(n / tile) tiles, and test lengths that are not a multiple "
           "of any tile size: uninitialised rows can hold anything, including the right answer.",
    source="",
    seen_in="the fused kernel wafer.ai describes that passed correctness while reading garbage "
            "memory (https://www.wafer.ai/blog/reward-hacking), and the reuse of memory freed "
            "by the reference that KernelBench's adversarial tests guard against "
            "(https://github.com/ScalingIntelligence/KernelBench/pull/82)",
    caught_by=(
        "known_answers", "matches_loop_oracle", "weights_are_distributions",
        "low_precision_agreement", "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        full = super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                enable_gqa)  # (N, ..., H, L, Ev), what the tiles compute
        L = full.shape[-2]
        # the kernel's torch.empty, as a fresh page reads: zeros (what garbage is differs by run)
        out = torch.zeros(full.shape, dtype=full.dtype, device=full.device)
        for start in range(0, L // TILE * TILE, TILE):  # BUG: the last L mod 64 rows: no tile
            out[..., start:start + TILE, :] = full[..., start:start + TILE, :]
        return out


SDPA = Sdpa()
