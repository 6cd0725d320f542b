"""Scores divided by d_k instead of √d_k.

Dividing by d_k is a real choice — µP uses it so that hyperparameters transfer across widths —
but it is a different function. Where the contract is 1/√d_k (the paper, the lessons,
F.scaled_dot_product_attention's default), scores come out √d_k times too small: attention is
flatter than intended, more so the wider the head, and at d_k = 1 nothing differs at all. It is
also what a misremembered formula, or a ``** 0.5`` lost in an edit, produces.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="scale-by-d-k",
    title="Scores divided by d_k (the µP scale) where 1/√d_k is the contract",
    category="scaling",
    symptom="silent",
    lesson="Divide by √d_k unless the model was designed (µP) for 1/d_k; the two do not mix.",
    source="seed 003 · «Зачем делить на √d_k» · «Не единственный вариант»",
    seen_in="code mixing µP-style attention (1/d) into a standard model, and formulas "
            "misremembered as QKᵀ/d",
    caught_by=(
        "known_answers", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk", "shift_invariance",
        "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / d_k  # BUG: (..., T_q, T_k) / d_k, not / √d_k
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / d_k  # BUG: (..., T_q, T_k) / d_k, not / √d_k
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
