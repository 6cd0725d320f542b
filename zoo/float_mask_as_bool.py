"""A float (additive) attn_mask converted to bool and used as a keep mask.

``attn_mask`` has two meanings in one argument: a bool mask says where a query may attend, a
float mask is added to the scores (0 where allowed, −∞ where not, anything in between as a
bias). Code that "normalises" the mask with ``.bool()`` — natural when masks arrive as 1.0/0.0
padding flags — reads the additive mask upside down: ``bool(0.0)`` is False, so every key with
no bias is forbidden, and ``bool(-inf)`` is True, so the keys that should vanish are kept. The
bias values themselves are lost. Nothing raises: the result is a perfectly normalised softmax
over the wrong keys.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="float-mask-as-bool",
    title="Float (additive) attn_mask turned into a bool keep mask",
    category="masking",
    symptom="silent",
    lesson="Add a float attn_mask to the scores, never cast it to bool: 0 = attend, −∞ = forbid.",
    source="",
    seen_in="attention wrappers that accept both 0/1 padding masks and additive masks and "
            "coerce whatever arrives with .bool() or != 0 before calling the kernel",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "mask_forms_agree",
        "empty_rows_are_zero", "low_precision_agreement", "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # top-left
            bias = bias.masked_fill(~allowed, float("-inf"))
        if attn_mask is None:
            return bias
        attn_mask = attn_mask.bool()  # BUG: 0.0 -> False (forbidden), -inf -> True (kept)
        return torch.where(attn_mask, bias, float("-inf"))  # (..., L, S): False -> -inf


SDPA = Sdpa()
