"""(batch, head) slices launched in chunks of at most 65535, one launch per chunk.

The fix for a grid axis's 65535-block limit: split the slices into chunks the grid can hold and
launch once per chunk. Each slice is still computed exactly once, by the same arithmetic, so the
answer is the single-launch answer whatever the number of slices. Calls with a mask, grouped
heads or dropout go in one launch, as the reference computes them.
"""

import numpy as np
import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Decoy

GRID = 65535  # the largest number of blocks along one grid axis

DECOY = Decoy(
    id="grid-chunked",
    title="(batch, head) slices launched in chunks of at most 65535",
    technique="the flattened (batch, head) slices split into chunks of 65535, each computed by "
    "its own launch, the chunks concatenated",
    why_correct="slices are independent, and every one of them lands in exactly one chunk",
)


class GridChunked(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        run = super().__call__
        if query.dim() < 3 or attn_mask is not None or enable_gqa or dropout_p > 0:
            return run(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        lead = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        q, k, v = (a.expand(lead + a.shape[-2:]).reshape(-1, *a.shape[-2:])
                   for a in (query, key, value))  # (slices, L|S, E|Ev)
        chunks = [run(q[i:i + GRID], k[i:i + GRID], v[i:i + GRID], None, 0.0, is_causal, scale)
                  for i in range(0, q.shape[0], GRID)]  # one launch per chunk of the grid
        return torch.cat(chunks).reshape(lead + chunks[0].shape[-2:])  # (N, ..., H, L, Ev)


SDPA = GridChunked()
