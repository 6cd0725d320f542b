"""The causal mask sized by the queries alone: an (L, L) triangle against (L, S) scores.

A causal mask is usually a square: nanoGPT registers `tril(ones(block, block))` once and slices
it `[:T, :T]` with T taken from the input. That is right while queries and keys are the same
tokens. Once they are not — a KV cache, cross-attention, chunked prefill — the scores are
(L, S) and the square is (L, L): the call crashes with a broadcast error, except for a single
query, where the (1, 1) mask broadcasts to every key and the query sees all S of them —
what KV-cache decoding wants, and not what top-left `is_causal` promises.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="causal-mask-sized-by-queries",
    title="Causal mask built as an (L, L) triangle from the query length, applied to (L, S) scores",
    category="causal",
    symptom="crash",
    lesson="Size the causal mask by both lengths, (L, S), and test with L ≠ S.",
    source="",
    seen_in="GPT-style modules that slice a square tril buffer by the query length and are "
            "later given a KV cache or keys of another length",
    caught_by=(
        "causal_alignment", "matches_loop_oracle", "weights_are_distributions", "causality",
        "queries_are_independent",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, L, dtype=torch.bool, device=query.device)  # BUG: L alone
            allowed = allowed.tril()  # (L, L): a square, as if S == L
            bias = bias.masked_fill(~allowed, float("-inf"))  # fits (L, S) only if S == L or L == 1
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, bias, float("-inf"))  # (..., L, S): False -> -inf
        return bias + attn_mask  # a float mask is added to the scores


SDPA = Sdpa()
