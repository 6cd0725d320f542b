"""A tiled backward that sums its key tiles in the order they happen to finish.

Fused backward kernels accumulate per-tile partial sums with atomic adds, so the order of the
additions is whichever thread block arrives first, and it changes from run to run. Floating
point addition is not associative: with three or more tiles, two backward calls on identical
inputs return gradients that differ in their last bits. Each gradient is still within rounding
of the exact one, so every accuracy check passes; only comparing two backward calls bit for bit
shows it. With at most 64 keys — all the quick battery has — there is one tile and one order.
"""

from zoo import Bug
from zoo.decoys.tiled_backward import TiledBackward

BUG = Bug(
    id="backward-tiles-summed-in-arrival-order",
    title="Tiled backward adds its key tiles' partial sums in a different order on every call",
    category="gradients",
    symptom="silent",
    lesson="A backward that promises reproducible training fixes the order of its reductions; "
           "one that does not says so, and its users test two backward calls bit for bit.",
    source="",
    seen_in="FlashAttention-2's backward, whose atomic-add accumulation is nondeterministic "
            "until a deterministic mode was added (flash_attn_func(deterministic=True), v2.4.1); "
            "PyTorch documents the same for its CUDA SDPA backward "
            "(torch.use_deterministic_algorithms)",
    caught_by=("backward_determinism",),
    depth="standard",
)


class Sdpa(TiledBackward):
    calls = 0

    def tile_starts(self, S):
        starts = list(range(0, S, self.tile))
        self.calls += 1
        shift = self.calls % len(starts)  # BUG: the tiles arrive in a different order each call
        return starts[shift:] + starts[:shift]


SDPA = Sdpa()
