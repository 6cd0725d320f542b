"""Scores not divided by √d_k.

The scale looks like a cosmetic constant, and the lesson's 2-dimensional examples barely move
without it (√2 ≈ 1.4). But a dot product of d_k unit-variance terms has standard deviation
√d_k: at a head size of 128 scores spread over ±25, softmax saturates to nearly one-hot and the
keys it ignores get almost no gradient. The outputs are still convex mixtures of the values, so
every sanity check on shapes, sums and masks passes.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="no-scaling",
    title="Scores not divided by √d_k",
    category="scaling",
    symptom="silent",
    lesson="Divide QKᵀ by √d_k (or multiply by scale, default 1/√E) before masking and softmax.",
    source="seed 003 · «Зачем делить на √d_k»",
    seen_in="first from-scratch attention implementations, and kernels that treat scale as an "
            "optional extra applied only when the caller passes one",
    caught_by=(
        "known_answers", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk", "shift_invariance",
        "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        scores = Q @ np.swapaxes(K, -1, -2)  # BUG: (..., T_q, T_k) not divided by √d_k
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1)  # BUG: (..., T_q, T_k) not divided by √d_k
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1.0 if scale is None else scale  # BUG: no 1/√E when no scale is given
        return query @ key.transpose(-2, -1) * factor  # (N, ..., H, L, S)


NUMPY = Numpy()
TORCH = Torch()
SDPA = Sdpa()
