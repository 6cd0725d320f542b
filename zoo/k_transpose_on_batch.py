"""`K.T` where the last two axes should be swapped.

On the lesson's (T, d) matrices `K.T` is exactly Kᵀ, so the worked examples come out right and
the habit sticks. On a batch (B, T, d) `.T` reverses every axis and gives (d, T, B): the
matmul then pairs the wrong axes and usually fails with a shape error. When the sizes happen to
line up (square batches, d = T) it runs and returns nonsense. NumPy does this silently; torch
only warns that `.T` on more than two dims is deprecated, and still reverses them.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="k-transpose-on-batch",
    title="K.T reverses every axis of a batched K instead of swapping the last two",
    category="shapes",
    symptom="crash",
    lesson="Name the axes to transpose: np.swapaxes(K, -1, -2) or K.transpose(-2, -1).",
    source="seed 003 · Батч: «Классический баг: K.T на батче»",
    seen_in="code written and tested on single (T, d) matrices, then fed batches or heads; "
            "NumPy ports of a lesson's 2-D formula",
    caught_by=(
        "matches_loop_oracle", "batch_consistency", "permutation_equivariance",
        "prefix_consistency", "causality", "head_independence", "queries_are_independent",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.T / math.sqrt(d_k)  # BUG: K.T reverses all axes: (B, T_k, d) -> (d, T_k, B)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.T / math.sqrt(d_k)  # BUG: K.T reverses all axes: (B, T_k, d) -> (d, T_k, B)
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
