"""`is_causal` aligned bottom-right where the contract says top-left.

With as many queries as keys there is one causal mask. With L ≠ S there are two: top-left
(query i sees keys j ≤ i), which `F.scaled_dot_product_attention` documents, and bottom-right
(query i sees j ≤ i + S − L), which flash-attention adopted in 2.1 because it is what decoding
with a KV cache needs — the last query is the newest token and sees every cached key. Code
written against one library's convention and called through the other's signature gives
different rows only when L ≠ S, so square training batches never show it. The fix is to pass
the alignment explicitly, or an explicit mask.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="causal-bottom-right",
    title="is_causal aligned bottom-right (j <= i + S − L) instead of PyTorch's top-left",
    category="causal",
    symptom="silent",
    lesson="With L ≠ S say which causal alignment you mean, and test it with rectangular inputs.",
    source="",
    seen_in="attention wrappers that switch between flash-attention (bottom-right since 2.1) "
            "and torch's SDPA (top-left) behind one is_causal flag; KV-cache decoding code",
    caught_by=(
        "causal_alignment", "matches_loop_oracle", "weights_are_distributions", "causality",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device)  # (L, S)
            allowed = allowed.tril(diagonal=S - L)  # BUG: bottom-right, j <= i + S - L
            bias = bias.masked_fill(~allowed, float("-inf"))
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, bias, float("-inf"))  # (..., L, S): False -> -inf
        return bias + attn_mask  # a float mask is added to the scores


SDPA = Sdpa()
