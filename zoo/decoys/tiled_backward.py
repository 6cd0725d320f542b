"""A hand-written backward computed tile by tile, as fused kernels write theirs.

The softmax backward needs, per query row, D = Σ_j P_ij dP_ij (FlashAttention-2 computes the
same number as rowsum(dO ⊙ O)). A kernel never holds a whole row, so D is accumulated over key
tiles of 64: D = Σ_tiles rowsum(P_t ⊙ dP_t), partial last tile included, in a float32 accumulator
as kernels keep theirs (a float16 one rounds each share and each addition: on a sharp row, where
D decides dS, that is up to three times the rounding of the reference's single sum). Everything
else is the hand-written backward of :mod:`zoo._autograd_attention`, which is correct.
"""

import torch

from zoo import Decoy
from zoo._autograd_attention import HandWrittenBackward

DECOY = Decoy(
    id="tiled-backward",
    title="Custom autograd.Function whose softmax backward sums D over key tiles of 64",
    technique="forward and backward written by hand; the row term D = Σ_j P_ij dP_ij is "
    "accumulated tile by tile across the keys",
    why_correct="a sum over the tiles of a partition of the keys is the sum over the keys, so "
    "dS = P ⊙ (dP − D) is the softmax Jacobian applied to dP",
)


class TiledBackward(HandWrittenBackward):
    tile = 64

    def grad_scores(self, weights, grad_weights):
        """dS = P ⊙ (dP − D), with D from :meth:`rowsum`."""
        return weights * (grad_weights - self.rowsum(weights, grad_weights))  # (..., L, S)

    def rowsum(self, weights, grad_weights):
        """D = Σ_j P_ij dP_ij, the tiles' shares added into one accumulator: (..., L, 1)."""
        total = 0
        for c in self.tile_starts(weights.shape[-1]):
            total = total + self.share(weights, grad_weights, c)
        return total.to(weights.dtype)

    def tile_starts(self, S):
        """Where each key tile starts, in the order their shares are added."""
        return range(0, S, self.tile)

    def share(self, weights, grad_weights, c):
        """The tile at ``c``'s share of D, summed in float32 or wider, as a kernel keeps its
        accumulators whatever the inputs' dtype: (..., L, 1)."""
        work = torch.promote_types(weights.dtype, torch.float32)
        block = weights[..., c:c + self.tile].to(work) * grad_weights[..., c:c + self.tile].to(work)
        return block.sum(dim=-1, keepdim=True)


SDPA = TiledBackward()
