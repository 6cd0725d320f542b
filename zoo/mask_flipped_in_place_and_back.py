"""The caller's boolean mask turned into a drop mask in place, and turned back afterwards.

A kernel that wants "True = masked" flips the keep-mask it was given with ``logical_not_()``
to save a copy, and — having been told that writing into an argument is a bug — flips it back
before returning. The bytes the caller holds afterwards are the bytes it passed, so comparing
them before and after the call sees nothing. But for the length of the call the caller's mask
says the opposite: another stream or thread reading it (the next layer's copy, a dataloader's
pinned buffer) sees it inverted, a mask in read-only or shared memory makes the call fail, and
an exception between the two flips leaves it inverted for good.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="mask-flipped-in-place-and-back",
    title="attn_mask.logical_not_() on the caller's mask, undone before returning",
    category="state",
    symptom="silent",
    lesson="A write put back is still a write: build the drop mask as a new tensor (~attn_mask).",
    source="",
    seen_in="kernels whose masking convention is the opposite of the caller's and that convert "
            "the mask they were given in place with logical_not_ or bitwise_not_, restoring it "
            "on the way out",
    caught_by=("input_immutability",),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        if attn_mask is None or attn_mask.dtype != torch.bool:
            return super().bias(attn_mask, is_causal, L, S, query)
        drop = attn_mask.logical_not_()  # BUG: the caller's mask, inverted in place
        bias = super().bias(None, is_causal, L, S, query).masked_fill(drop, -torch.inf)
        attn_mask.logical_not_()  # ... and put back: equal bytes, but it was written
        return bias


SDPA = Sdpa()
