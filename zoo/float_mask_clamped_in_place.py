"""The caller's float mask "made safe" in place: ``attn_mask.clamp_(min=finfo.min)``.

−∞ in a float mask can turn a fully masked row into 0/0, so the mask is clamped to the most
negative finite number — in place, to save a copy. The caller's mask now holds −1.8e308 where it
held −∞: the next layer, or the next call that shares the mask, gets a different mask, and a
row that no key may see spreads its weight evenly over all of them instead of being zero. The
first call on a fresh mask looks right, which is the only call most tests make.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="float-mask-clamped-in-place",
    title="attn_mask.clamp_() rewrites the caller's float mask (−∞ becomes finfo.min)",
    category="state",
    symptom="silent",
    lesson="Never write into an argument: clamp, add or fill a copy of the mask.",
    source="",
    seen_in="attention layers that replace -inf in a float mask by torch.finfo(dtype).min with "
            "clamp_ or masked_fill_ on the mask they were given, shared across layers or calls",
    caught_by=("empty_rows_are_zero", "input_immutability"),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        if attn_mask is not None and attn_mask.is_floating_point():
            attn_mask.clamp_(min=torch.finfo(attn_mask.dtype).min)  # BUG: writes into the argument
        return super().bias(attn_mask, is_causal, L, S, query)


SDPA = Sdpa()
