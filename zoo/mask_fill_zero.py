"""Masking with 0 instead of −∞.

A masked score is meant to vanish from the softmax. Zero is just another score: e⁰ = 1, so a
"masked" future token keeps a weight comparable to the visible ones, and a causal model reads
the answer it is supposed to predict. Nothing crashes and the rows still sum to 1.
"""

import math

import numpy as np

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="mask-fill-zero",
    title="Masked scores set to 0 instead of −∞",
    category="masking",
    symptom="silent",
    lesson="Fill masked scores with −∞, never 0: exp(0) = 1 keeps the future visible.",
    source="seed 003 · Ловушки: «Маска нулём вместо −∞»",
    seen_in="the first masking exercise of most courses; multiplying scores by a 0/1 mask",
    caught_by=(
        "known_answers", "matches_loop_oracle", "weights_are_distributions", "causality",
        "empty_rows_are_zero",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)  # BUG: 0 is an ordinary score, e^0 = 1
        weights = self.softmax(scores)
        return weights @ V, weights


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, 0.0)  # BUG: 0 is an ordinary score, e^0 = 1
        weights = self.softmax(scores)
        return weights @ V, weights


NUMPY = Numpy()
TORCH = Torch()
