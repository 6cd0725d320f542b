"""A tiled softmax backward that overwrites D per key tile instead of adding to it.

D = Σ_j P_ij dP_ij is a sum over every key. Accumulated tile by tile with ``=`` where ``+=``
belongs, it keeps only the last tile's share, so dS = P ⊙ (dP − D) is wrong for every row
whose keys span more than one tile. The forward is exact; with at most 64 keys — all the quick
battery has — there is one tile and the gradients are exact too.
"""

from zoo import Bug
from zoo.decoys.tiled_backward import TiledBackward

BUG = Bug(
    id="backward-rowsum-overwritten-per-tile",
    title="Tiled backward keeps only the last key tile's share of D = rowsum(P ⊙ dP)",
    category="gradients",
    symptom="silent",
    lesson="A quantity summed over tiles is accumulated (+=), and the backward is tested with "
           "more keys than one tile.",
    source="",
    seen_in="hand-written FlashAttention backward passes and fused-kernel exercises that loop "
            "over key blocks and assign the row term instead of accumulating it",
    caught_by=("correct_gradients",),
    depth="standard",
)


class Sdpa(TiledBackward):
    def rowsum(self, weights, grad_weights):
        total = 0
        for c in self.tile_starts(weights.shape[-1]):
            total = self.share(weights, grad_weights, c)  # BUG: '=' keeps only the last tile
        return total.to(weights.dtype)


SDPA = Sdpa()
