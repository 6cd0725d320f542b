"""Softmax that subtracts the row maximum in place.

The lesson's softmax subtracts the row maximum before ``exp`` so that nothing overflows, and
``x -= x.max(...)`` (``x.sub_(...)`` in PyTorch) looks like the same line without a temporary.
But ``x`` is the caller's array: after the call the caller's scores are shifted so that every
row peaks at 0. The result is right, and softmax of the shifted scores is still right, because
softmax is shift-invariant. So nothing complains until someone reuses the scores (logits kept for
a loss, a plot, a second head), or until PyTorch needs ``x`` for the backward pass of the max
and finds it modified.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="softmax-in-place",
    title="Softmax subtracts the row maximum from the caller's scores in place",
    category="state",
    symptom="silent",
    lesson="Subtract the maximum into a new array (x - m), never in place: the scores "
           "belong to the caller.",
    source="seed 003 · Практика: «вычтите максимум по последней оси (keepdims=True), "
           "возьмите exp, поделите на сумму»",
    seen_in="hand-written stable softmax that reuses the input buffer to save memory (x -= "
            "x.max(...), x.sub_(...)); in PyTorch it usually surfaces as autograd's error "
            "about a variable needed for gradient computation modified by an inplace operation",
    caught_by=("input_immutability",),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        m = np.max(x, axis=-1, keepdims=True)  # (..., 1) row maximum
        m = np.where(np.isneginf(m), 0.0, m)  # an all -inf row has no maximum to subtract
        x -= m  # BUG: shifts the caller's scores in place
        e = np.exp(x)  # (..., n) in [0, 1], exactly 0 at -inf
        total = np.sum(e, axis=-1, keepdims=True)  # (..., 1)
        return e / np.where(total == 0.0, 1.0, total)


class Torch(LessonTorch):
    def softmax(self, x):
        m = x.amax(dim=-1, keepdim=True)  # (..., 1) row maximum
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # an all -inf row: subtract 0
        x.sub_(m)  # BUG: shifts the caller's scores in place
        e = torch.exp(x)  # (..., n) in [0, 1], exactly 0 at -inf
        total = e.sum(dim=-1, keepdim=True)  # (..., 1)
        return e / torch.where(total == 0, torch.ones_like(total), total)


NUMPY = Numpy()
TORCH = Torch()
