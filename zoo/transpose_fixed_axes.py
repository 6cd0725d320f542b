"""Keys transposed with axes numbered for (B, T, d): `K.transpose(0, 2, 1)` / `K.transpose(1, 2)`.

Someone learns that `K.T` breaks on batches and fixes it for the shape in front of them: with
(B, T, d) keys, axes 1 and 2 are the ones to swap. The numbers are right for exactly that
rank. A single (T, d) sequence has no axis 2 and crashes; with heads, (B, H, T, d), axes 1 and
2 are heads and time, so the matmul pairs the wrong axes and fails, or, when the sizes happen
to line up, quietly mixes heads into positions. Counting axes from the end (-2, -1) works for
every rank.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="transpose-fixed-axes",
    title="Keys transposed on fixed axes (1, 2), right only for 3-D (B, T, d) input",
    category="shapes",
    symptom="crash",
    lesson="Swap the last two axes by counting from the end (-2, -1), never by fixed positions.",
    source="seed 003 · Батч: «Классический баг: K.T на батче»",
    seen_in="attention written for (batch, time, dim) tensors and later reused for single "
            "sequences or multi-head (batch, heads, time, dim) tensors",
    caught_by=(
        "known_answers", "matches_loop_oracle", "mask_forms_agree", "permutation_equivariance",
        "causality", "head_independence", "queries_are_independent",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(0, 2, 1) / math.sqrt(d_k)  # BUG: axes fixed for (B, T_k, d) only
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(1, 2) / math.sqrt(d_k)  # BUG: axes fixed for (B, T_k, d) only
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
