"""Softmax over the query axis (-2) instead of the key axis (-1).

Each query needs a distribution over keys: rows of the (T_q, T_k) score matrix. Normalising
columns instead — ``axis=0`` written for a 2-D example, ``dim=1`` on a (B, T, T) batch — gives
numbers in [0, 1] of the right shape, and on a square matrix nothing raises. Columns now sum to
1, rows do not, and each query's output depends on the other queries' scores; under a causal
mask the last query gets only what the earlier ones left.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="softmax-wrong-axis",
    title="Softmax normalised over queries (axis -2) instead of keys",
    category="softmax",
    symptom="silent",
    lesson="Take softmax over the last axis, the keys: each query's weights must sum to 1.",
    source="",
    seen_in="softmax(dim=1) or axis=0 hard-coded for one layout and reused on another; "
            "the attention scores' two T axes look alike",
    caught_by=("prefix_consistency", "causality", "queries_are_independent"),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        axis = -2  # BUG: the query axis; a row of keys is the last axis
        m = np.max(x, axis=axis, keepdims=True)  # (..., 1, n) column maximum
        m = np.where(np.isneginf(m), 0.0, m)  # an all -inf column has no maximum to subtract
        e = np.exp(x - m)  # (..., T, n) in [0, 1], exactly 0 at -inf
        total = np.sum(e, axis=axis, keepdims=True)  # (..., 1, n)
        return e / np.where(total == 0.0, 1.0, total)  # columns sum to 1, rows do not


class Torch(LessonTorch):
    def softmax(self, x):
        dim = -2  # BUG: the query axis; a row of keys is the last axis
        m = x.amax(dim=dim, keepdim=True)  # (..., 1, n) column maximum
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # an all -inf column: 0
        e = torch.exp(x - m)  # (..., T, n) in [0, 1], exactly 0 at -inf
        total = e.sum(dim=dim, keepdim=True)  # (..., 1, n)
        return e / torch.where(total == 0, torch.ones_like(total), total)  # columns sum to 1


NUMPY = Numpy()
TORCH = Torch()
