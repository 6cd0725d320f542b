"""Scores divided by √d_v, the value width, instead of √d_k.

In most tutorials and models d_k = d_v (= d_model / h), so "the head size" is one number and it
does not matter which tensor it is read from. Code that reads it from V — or from the output
projection, or a config field named ``head_dim`` that really means the value width — is right
for every such model and wrong as soon as keys and values differ in width (MLA-style heads,
asymmetric projections). The lessons' examples have d_k = d_v = 2, so they pass.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="scale-by-d-v",
    title="Scores divided by √d_v (V's width) instead of √d_k",
    category="scaling",
    symptom="silent",
    lesson="Take d_k from Q or K (Q.shape[-1]); the value width is another number.",
    source="",
    seen_in="implementations written for d_k = d_v that read the head size from whichever "
            "tensor or config field is at hand, then reused with asymmetric key and value widths",
    caught_by=(
        "matches_loop_oracle", "scores_scaled_by_rsqrt_dk", "shift_invariance",
        "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = V.shape[-1]  # BUG: the value width, equal to d_k only when d_v = d_k
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = V.shape[-1]  # BUG: the value width, equal to d_k only when d_v = d_k
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
