"""Masking the weights after softmax instead of the scores before it.

The mask is meant to take forbidden keys out of the normalisation. Zeroing their weights once
softmax has already shared the mass among all keys removes them from the output but not from
the denominator: each row now sums to less than 1, by exactly the weight the future had, and a
later token still changes every earlier row through that sum. The shapes are right, the
forbidden weights are exactly 0, and nothing raises.
"""

import math

import numpy as np

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="mask-after-softmax",
    title="Weights zeroed after softmax, rows no longer sum to 1",
    category="masking",
    symptom="silent",
    lesson="Mask the scores with −∞ before softmax; zeroing weights later breaks the row sums.",
    source="seed 003 · Ловушки: «Маска после softmax»",
    seen_in="code that applies a 0/1 mask by multiplication to whatever tensor is at hand, "
            "and attention-visualisation code that hides the future only in the plotted weights",
    caught_by=(
        "known_answers", "matches_loop_oracle", "weights_are_distributions", "prefix_consistency",
        "causality", "mask_poisoning", "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        weights = self.softmax(scores)  # (..., T_q, T_k), normalised over every key
        if mask is not None:
            weights = weights * mask  # BUG: zeroed after softmax, the row sum drops below 1
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        weights = self.softmax(scores)  # (..., T_q, T_k), normalised over every key
        if mask is not None:
            weights = weights * mask  # BUG: zeroed after softmax, the row sum drops below 1
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
