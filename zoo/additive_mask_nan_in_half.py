"""A bool mask turned into an additive one with a constant that is −∞ in float16.

The additive form of a mask is 0 where a query may attend and a large negative number where it
may not, and ``(1 − mask) · big_negative`` is the textbook way to build it. To keep the constant
on the right device and in the right dtype it is made with ``query.new_tensor(-1e9)``. In
float64, float32 and bfloat16 that is −1e9 and the mask works (apart from rows with no allowed
key, which −1e9 spreads evenly instead of zeroing). In float16 −1e9 rounds to −∞, and every
allowed key gets ``0 · (−∞) = NaN``: the whole output is NaN, for every masked or causal call.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="additive-mask-nan-in-half",
    title="Additive mask (1 − mask)·(−1e9) is NaN in float16",
    category="precision",
    symptom="nan",
    lesson="Build additive masks with torch.where(mask, 0, -inf); a product with a constant "
           "that overflows to −∞ makes 0·(−∞) = NaN.",
    source="",
    seen_in="bool-to-additive mask conversions of the (1 - mask) * -1e9 kind, with the constant "
            "created in the activations' dtype, in models that work in float32 and produce NaN "
            "losses once switched to float16",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "mask_forms_agree", "mask_poisoning",
        "empty_rows_are_zero", "low_precision_agreement",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        big = query.new_tensor(-1e9)  # BUG: in the query's dtype: -inf in float16
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # top-left
            bias = bias + (1 - allowed.to(query.dtype)) * big  # BUG: 0 * -inf = NaN in float16
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return bias + (1 - attn_mask.to(query.dtype)) * big  # BUG: (..., L, S), NaN in float16
        return bias + attn_mask  # a float mask is added to the scores


SDPA = Sdpa()
