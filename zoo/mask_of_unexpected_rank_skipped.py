"""A mask that is not 4-D is skipped: only (N, H, L, S) masks are applied.

A generated kernel handles the mask layout it was shown, a full ``(N, H, L, S)`` tensor, and
guards the mask path with ``attn_mask.dim() == 4`` so that nothing else can index it out of
bounds. A 2-D ``(L, S)`` mask or a 3-D one — the forms that broadcast, and the ones most
callers pass — fall through the guard and attention runs unmasked. KernelBench's SDPA problem
passes no mask at all, so it never reaches the guard.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="mask-of-unexpected-rank-skipped",
    title="attn_mask applied only when it is 4-D: a 2-D or 3-D mask is silently ignored",
    category="generated",
    symptom="silent",
    lesson="Broadcast every mask shape the signature accepts, or refuse it loudly; never let a "
           "guard turn an argument into a no-op.",
    source="",
    seen_in="generated kernels checked only on the benchmark's own inputs, which for "
            "KernelBench's SDPA problem have no mask (level1/97_ScaledDotProductAttention.py, "
            "see https://github.com/ScalingIntelligence/KernelBench/issues/165 for the check); "
            "robust-kbench (https://arxiv.org/abs/2509.14279) reports kernels specialised to "
            "the inputs they were shown",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "causality", "mask_poisoning",
        "low_precision_agreement", "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        if attn_mask is not None and attn_mask.dim() != 4:
            attn_mask = None  # BUG: a 2-D or 3-D mask is dropped instead of broadcast
        return super().bias(attn_mask, is_causal, L, S, query)  # (..., L, S)


SDPA = Sdpa()
