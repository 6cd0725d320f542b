"""The number of key tiles computed as S // 64: the partial last tile is never read.

A kernel that launches ``S // BLOCK_N`` key tiles instead of ``ceil(S / BLOCK_N)`` silently
drops the last S mod 64 keys. Sequences shorter than one tile get a special case (one tile
of S keys), so every short test passes; at 65, 129 or 513 keys the tail is missing from the
softmax and from the output.
"""

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="key-tail-tile-dropped",
    title="Key tiles counted as S // tile: the partial last tile is dropped",
    category="shapes",
    symptom="silent",
    lesson="Cover a length with ceil(n / block) blocks and mask the partial last one; test at "
           "lengths on both sides of every block size.",
    source="",
    seen_in="hand-written CUDA and Triton attention kernels whose grid or loop bound is "
            "seqlen_k // BLOCK_N, correct only when the length is a multiple of the block",
    caught_by=("matches_loop_oracle",),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def key_tiles(self, S):
        n = self.k_tile
        if S <= n:
            return [(0, S)]
        return [(a, a + n) for a in range(0, S // n * n, n)]  # BUG: S mod n keys never read


SDPA = Sdpa()
