"""Scaling the caller's query in place.

Dividing Q by √d_k before the product instead of dividing the (T_q, T_k) scores after it is a
fine habit: same numbers, fewer divisions. Doing it with ``Q /= ...`` or ``Q.div_(...)``, to
save a copy, divides the caller's own array. The answer that comes back is right, so every test
that calls once passes; the caller's Q is now √d_k times smaller, and the next call with the same
Q (another head, another layer sharing it, a test that repeats the call) quietly attends with
scores scaled twice. NumPy never complains; PyTorch complains only when Q is a leaf that
requires grad.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="query-scaled-in-place",
    title="Q divided by √d_k in place, modifying the caller's array",
    category="state",
    symptom="silent",
    lesson=(
        "Scale a copy (Q / √d_k), never the caller's array (Q /= √d_k, Q.div_): "
        "the inputs are not yours to change."
    ),
    source="",
    seen_in=(
        "hand-written attention that folds the scale into the query with an augmented "
        "assignment or an in-place tensor method to save memory; in PyTorch it usually "
        "surfaces only as autograd's error about a leaf variable used in an in-place operation"
    ),
    caught_by=("input_immutability",),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        Q /= math.sqrt(d_k)  # BUG: divides the caller's Q in place
        scores = Q @ np.swapaxes(K, -1, -2)  # (..., T_q, T_k), scaled through Q
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        Q.div_(math.sqrt(d_k))  # BUG: divides the caller's Q in place
        scores = Q @ K.transpose(-2, -1)  # (..., T_q, T_k), scaled through Q
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
TORCH = Torch()
