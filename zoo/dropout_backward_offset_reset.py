"""A backward that regenerates the dropout mask from the seed alone, its offset reset to zero.

A kernel that never stores its mask takes a (seed, offset) pair from torch's generator in the
forward — the offset is where the generator stands, moved on by every call that drew — and the
backward must regenerate the mask from that same pair. Save the seed and not the offset, and the
backward draws at offset 0: the first draw after the generator was last seeded. Right after a
seed that is the forward's own draw, so every test that reseeds before its call passes; from the
second step of a training loop on, each backward differentiates another step's mask.
"""

import torch

from zoo import Bug
from zoo.decoys.dropout_seed_replayed import SeedReplayed

BUG = Bug(
    id="dropout-backward-offset-reset",
    title="The backward regenerates the dropout mask at offset 0 instead of the forward's offset",
    category="gradients",
    symptom="silent",
    lesson="Save the whole random state the forward's mask came from — seed and offset — and "
           "regenerate the backward's mask from exactly that.",
    source="",
    seen_in="PyTorch's CK flash-attention forward, whose backward got a seed and offset other "
            "than the forward's — (0, 0) or an earlier call's — and regenerated another mask "
            "(https://github.com/pytorch/pytorch/pull/197563)",
    caught_by=("dropout_backward_uses_forward_mask",),
)


class Sdpa(SeedReplayed):
    def replayed_seed(self, seed):
        # BUG: the draw at offset 0 of the last seeding, not the forward's draw
        first = torch.Generator().manual_seed(torch.initial_seed())
        return int(torch.randint(0, 2**62, (), dtype=torch.int64, generator=first))


SDPA = Sdpa()
