"""Softmax stabilised with the maximum of the whole array, not of each row.

``x - x.max()`` is the 1-D recipe from seed 000 applied unchanged to a matrix: it forgets
``axis=-1``. The shift is still a constant, so every row whose scores lie near the global
maximum is exact. A row far below it — another batch item, another head, a query whose keys all
score low — underflows: its exps lose precision and, more than ~745 below (~100 in float32,
~17 in float16), become all 0, so the row comes out as zeros as though no key were allowed.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="softmax-global-max",
    title="Softmax subtracts the global maximum: rows far below it underflow to zero",
    category="softmax",
    symptom="silent",
    lesson="Subtract each row's own maximum (axis=-1, keepdims=True), not the array's.",
    source="seed 000 · «Шаг softmax отдельно»: «Вычитаем максимум для численной устойчивости»",
    seen_in="the 1-D softmax of a first lesson (m = max(scores)) vectorised without an axis: "
            "np.max(x) or x.max() where x.max(axis=-1, keepdims=True) was meant",
    caught_by=("shift_invariance", "causality", "low_precision_agreement"),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        m = np.max(x)  # BUG: one maximum for the whole array, not one per row
        m = np.where(np.isneginf(m), 0.0, m)  # an all -inf array has no maximum to subtract
        e = np.exp(x - m)  # (..., n), a row far below m underflows to 0
        total = np.sum(e, axis=-1, keepdims=True)  # (..., 1)
        return e / np.where(total == 0.0, 1.0, total)  # an underflowed row becomes all 0


class Torch(LessonTorch):
    def softmax(self, x):
        m = x.amax()  # BUG: one maximum for the whole tensor, not one per row
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # all -inf: subtract 0
        e = torch.exp(x - m)  # (..., n), a row far below m underflows to 0
        total = e.sum(dim=-1, keepdim=True)  # (..., 1)
        return e / torch.where(total == 0, torch.ones_like(total), total)  # underflow -> 0


NUMPY = Numpy()
TORCH = Torch()
