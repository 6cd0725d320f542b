"""A kernel built for head dims up to 128 reads only the first 128 features of wider heads.

The head dimension is summed in blocks of 128 (a register tile); code that sizes its loop for
the largest head dim it was written for, and never checks, computes scores from the first 128
features of a 160- or 256-wide head. Every score is still finite and every row still sums to
1 — the numbers are merely wrong. Heads of at most 128 features, all the quick battery has,
are exact.
"""

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="head-dim-past-128-ignored",
    title="Scores summed over the first 128 head features only",
    category="shapes",
    symptom="silent",
    lesson="A kernel with a maximum head dim checks it: refuse, or loop over every block of "
           "the head dimension.",
    source="",
    seen_in="fused attention kernels specialised for head dims up to 128 (early "
            "FlashAttention versions stopped there) reused for 160- and 256-wide heads "
            "without a shape check",
    caught_by=("matches_loop_oracle",),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def scores(self, q, k, factor):
        s, n = 0, self.d_block
        for f in range(0, min(q.shape[-1], n), n):  # BUG: one block, whatever the head dim
            s = s + (q[..., f:f + n] * factor) @ k[..., f:f + n].transpose(-2, -1)
        return s


SDPA = Sdpa()
