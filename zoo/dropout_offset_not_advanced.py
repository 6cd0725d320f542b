"""A fused kernel's dropout seed taken from torch's generator without advancing its offset.

A kernel that regenerates its dropout mask from a (seed, offset) pair must take a fresh pair on
every call: the offset is advanced by the number of random values the call consumes, so the next
call draws new ones. Read the seed once from the generator (here ``torch.initial_seed()``, the
value torch was seeded with) and start the offset at zero, and every call draws the same pattern
until torch is reseeded. Each call on its own is flawless — the right keep rate, independent
positions, the forward's mask in the backward, a seed that reproduces it — so every test that
reseeds before its call passes; across training steps the same weights are dropped every time.
"""

import torch

from zoo import Bug
from zoo.decoys.dropout_seed_replayed import SeedReplayed

BUG = Bug(
    id="dropout-offset-not-advanced",
    title="Dropout draws the same pattern on every call: the random offset is never advanced",
    category="state",
    symptom="silent",
    lesson="Take a new (seed, offset) from the generator on every call and advance it by what "
           "the call consumes; a fixed pair repeats the mask on every step.",
    source="",
    seen_in="flash-attention's Triton AMD interface, where need_dropout() sets philox_seed and "
            "philox_offset to constants (https://github.com/Dao-AILab/flash-attention/issues/"
            "2088); ffpa-attn's 'fix philox state for dropout' "
            "(https://github.com/xlite-dev/ffpa-attn/pull/166)",
    caught_by=("dropout_follows_the_seed",),
)


class Sdpa(SeedReplayed):
    def draw_seed(self):
        return torch.initial_seed()  # BUG: the seed alone, offset 0: the same on every call


SDPA = Sdpa()
