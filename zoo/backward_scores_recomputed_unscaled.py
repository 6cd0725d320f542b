"""The backward recomputes the scores as (Q Kᵀ) · scale in the input precision.

A recompute-style backward rebuilds S from the saved Q and K. The forward scales first and
accumulates in float32; the backward, written later and "just the formula", multiplies
``query @ key.transpose(-2, -1)`` in the input dtype and scales afterwards. In float16 a raw
q·k past 65504 — head dims of 64 and more with activations of a few hundred — is ±inf before
the scale could bring it back, and the recomputed P, and every gradient, is NaN, while the
forward pass is exact and float64 gradients are right.
"""

import torch

from zoo import Bug
from zoo.decoys.recompute_backward import RecomputeBackward

BUG = Bug(
    id="backward-scores-recomputed-unscaled",
    title="The backward recomputes Q Kᵀ in float16 before scaling: inf, then NaN gradients",
    category="gradients",
    symptom="nan",
    lesson="Recompute in the backward exactly what the forward computed, in the same order and "
           "precision: scale before the product, accumulate in float32.",
    source="",
    seen_in="hand-written PyTorch recompute backwards for memory-efficient attention that "
            "rebuild the scores as (q @ k.transpose(-2, -1)) * scale in the input dtype, while "
            "the forward kernel scaled first and accumulated in float32",
    caught_by=("low_precision_gradients",),
    depth="standard",
)


class Sdpa(RecomputeBackward):
    def recompute_scores(self, query, key, bias, factor):
        work = torch.promote_types(query.dtype, torch.float32)
        raw = query @ key.transpose(-2, -1)  # BUG: raw q·k in float16 overflows past 65504
        return raw.to(work) * factor + bias.to(work)  # (..., L, S)


SDPA = Sdpa()
