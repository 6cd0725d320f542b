"""d_k read from axis 1: right for a (T, d_k) matrix, the sequence length for a batch.

The lesson's NumPy code starts on 2-D arrays, where ``Q.shape[1]`` is d_k. Add a batch axis and
the same expression is T: the scores are divided by √T, sharper or flatter depending on the
sequence length. All the unbatched examples pass, and so does every batch whose length happens
to equal the head size.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="scale-from-wrong-axis",
    title="d_k = Q.shape[1]: the sequence length once there is a batch axis",
    category="scaling",
    symptom="silent",
    lesson="Index feature axes from the end (Q.shape[-1]) so the code survives a batch axis.",
    source="",
    seen_in="code first written for a single sequence and later fed batches; shape[1] means "
            "different things for (T, d) and (B, T, d)",
    caught_by=(
        "matches_loop_oracle", "batch_consistency", "prefix_consistency",
        "scores_scaled_by_rsqrt_dk", "shift_invariance", "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[1]  # BUG: d_k for (T, d_k), but T for (B, T, d_k)
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[1]  # BUG: d_k for (T, d_k), but T for (B, T, d_k)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
