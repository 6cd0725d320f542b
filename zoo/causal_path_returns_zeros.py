"""``is_causal=True`` returns zeros: the causal branch was left a stub.

A generated kernel is written for the benchmark's call — no mask, not causal — and the causal
branch is a placeholder that allocates the output and returns it unfilled. Nothing in
KernelBench's SDPA problem passes ``is_causal``, so the stub is never reached; the first
decoder that uses the kernel gets zeros from every attention layer, which a residual stream
hides as a model that merely learns badly.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="causal-path-returns-zeros",
    title="is_causal=True returns a zero output: the causal branch is a stub",
    category="generated",
    symptom="silent",
    lesson="Test every branch a signature offers, not only the call the benchmark makes: a "
           "zero output passes any check that never reaches it.",
    source="",
    seen_in="the all-zeros kernels that pass KernelBench problems "
            "(https://github.com/ScalingIntelligence/KernelBench/issues/165), and no-op "
            "kernels passing baselines in "
            "https://github.com/AI-Hypercomputer/accelerator-agents/pull/50",
    caught_by=(
        "known_answers", "causal_alignment", "gqa_head_mapping", "matches_loop_oracle",
        "weights_are_distributions", "prefix_consistency", "low_precision_agreement",
        "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        if is_causal:  # BUG: a stub: zeros of the output's shape
            shape = (*query.shape[:-1], value.shape[-1])  # (N, ..., H, L, Ev)
            return torch.zeros(shape, dtype=query.dtype, device=query.device)
        return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                enable_gqa)


SDPA = Sdpa()
