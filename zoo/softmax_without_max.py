"""Softmax without subtracting the maximum: exp overflows on large scores.

exp(x) / Σ exp(x) is the definition, and it is exact for the small numbers in every worked
example. exp overflows past 709 in float64 (88 in float32, 11 in float16): a row with one large
score becomes inf / inf = NaN. Rows that are all very negative underflow the other way, to 0/0
(turned into a zero row by the guard kept here). The lesson's own softmax subtracts the row
maximum for exactly this reason, and the result does not change — softmax is shift-invariant.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="softmax-without-max",
    title="Softmax without max subtraction overflows on large scores",
    category="softmax",
    symptom="nan",
    lesson="Subtract each row's maximum before exp: same result, and exp cannot overflow.",
    source="seed 000 · «Шаг softmax отдельно»: «Вычитаем максимум для численной устойчивости»",
    seen_in="softmax written straight from the formula, which works on every small example "
            "and overflows in float16 or once the logits grow during training",
    caught_by=("shift_invariance", "low_precision_agreement"),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        e = np.exp(x)  # BUG: no max subtracted, inf past x ≈ 709 (88 in float32)
        total = np.sum(e, axis=-1, keepdims=True)  # (..., 1)
        return e / np.where(total == 0.0, 1.0, total)  # an all -inf row stays 0, never 0/0


class Torch(LessonTorch):
    def softmax(self, x):
        e = torch.exp(x)  # BUG: no max subtracted, inf past x ≈ 709 (88 in float32)
        total = e.sum(dim=-1, keepdim=True)  # (..., 1)
        return e / torch.where(total == 0, torch.ones_like(total), total)  # never 0/0


NUMPY = Numpy()
TORCH = Torch()
