"""Chunked queries whose causal block uses the chunk's own row numbers, not absolute positions.

Processing queries in chunks of 64 (chunked prefill) is exact as long as each chunk's causal
mask is built from absolute positions: query 70 may see keys 0 … 70. Building it from the row
index inside the chunk (0 … 63) lets query 70 see only keys 0 … 6. The first chunk is right,
and with fewer than 64 queries there is only the first chunk.
"""

import torch

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="causal-offset-reset-per-chunk",
    title="Chunked queries build the causal mask from chunk-local row numbers",
    category="causal",
    symptom="silent",
    lesson="A chunk's causal mask compares absolute positions: offset the query index by where "
           "the chunk starts.",
    source="",
    seen_in="chunked-prefill and query-blocked attention code that slices the queries and "
            "rebuilds tril(ones(chunk, S)) for every slice, forgetting the slice's offset",
    caught_by=("matches_loop_oracle",),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def causal_block(self, rows, cols, device):
        (a, b), (c, d) = rows, cols
        keys = torch.arange(c, d, device=device)
        queries = torch.arange(0, b - a, device=device)  # BUG: rows of the chunk, not positions
        return keys[None, :] <= queries[:, None]


SDPA = Sdpa()
