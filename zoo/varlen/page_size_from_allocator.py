"""The allocator's block size taken for the cache's: pages are cut 16 keys wide whatever the
cache holds.

A serving stack's memory manager may count in blocks of one size while the kernel's cache is
laid out in another; passing the first as the second reads too few pages (or slots of the wrong
ones). Tests that use the one block size both agree on never see it.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-page-size-from-allocator",
    title="Pages assumed 16 keys wide (the allocator's size), not the cache's block size",
    category="paging",
    symptom="silent",
    lesson="Take the page size from the cache tensor itself; test block sizes other than the "
           "allocator's.",
    source="",
    seen_in="https://github.com/vllm-project/vllm/pull/27547 (the manager's block size passed "
            "as the kernel's block size; garbage loads)",
    caught_by=(
        "alibi_is_a_float_bias",
        "lse_matches_output",
        "matches_reference",
        "page_placement_invariance",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
    ),
)

ALLOCATOR_BLOCK = 16


class Loop(SequenceLoop):
    def keys(self, k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table):
        if block_table is None:
            start, end = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
            used = end - start if seqused_k is None else int(seqused_k[b])
            return k[start:start + used], v[start:start + used]
        used, size = int(seqused_k[b]), ALLOCATOR_BLOCK  # BUG: not k.shape[1]
        pages = [int(p) for p in block_table[b, :-(-used // size)]] if used else []
        ks = [k[p] for p in pages] or [k[:0, 0]]
        vs = [v[p] for p in pages] or [v[:0, 0]]
        return torch.cat(ks)[:used], torch.cat(vs)[:used]


VARLEN = Loop()
