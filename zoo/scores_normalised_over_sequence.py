"""Scores standardised by the spread of the whole score matrix, before the mask.

Large scores saturate softmax, so someone "helps" by dividing each score matrix by its own
standard deviation — a one-line normalisation that makes the logits well-behaved for any input.
The statistic is taken over all T_q × T_k scores, before the causal mask removes the future:
every row's temperature now depends on keys it may not see. Token i's output changes when a
later token changes, and a prefix gives different outputs alone than inside a longer sequence.
The weights are still distributions, zero on masked keys, and nothing crashes — until a
one-token sequence, whose single score has no spread: 0/0, and the output is NaN.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="scores-normalised-over-sequence",
    title="Scores divided by the std of the whole score matrix, future keys included",
    category="causal",
    symptom="silent",
    lesson="Scale scores by a constant, 1/√d_k; a statistic over all keys lets the future in.",
    source="",
    seen_in="attempts to tame exploding attention logits with a normalisation computed over "
            "the score matrix instead of fixed scaling or per-row operations",
    caught_by=(
        "known_answers", "matches_loop_oracle", "prefix_consistency", "causality",
        "mask_poisoning", "queries_are_independent",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        scores = scores / scores.std(axis=(-2, -1), keepdims=True)  # BUG: spread of future keys too
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), rows sum to 1 (0 if empty)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        scores = scores / scores.std(dim=(-2, -1), keepdim=True)  # BUG: spread over future keys too
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), rows sum to 1 (0 if empty)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
