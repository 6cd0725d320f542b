"""The textbook stable softmax, unguarded: a row of −∞ gives 0/0 = NaN.

Subtracting the row maximum is exactly what the lessons teach, and it is right for every row
that has a finite score. A row that padding closes completely has maximum −∞, and
−∞ − (−∞) is NaN; the NaN spreads to the whole weight row, to the output row and, in training,
to every parameter. Tests with causal masks never see it: the diagonal is always allowed.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="fully-masked-row-nan",
    title="Stable softmax without a guard: an all −∞ row gives NaN",
    category="softmax",
    symptom="nan",
    lesson="Guard softmax for a row with no finite score: subtract 0, not −∞; return 0, not 0/0.",
    source="seed 003 · Ловушки: «Полностью закрытая строка»",
    seen_in="hand-written softmax following the textbook recipe (x - max, exp, / sum), and "
            "torch.softmax itself, which returns NaN for a fully masked row; padding masks "
            "for batch items that are all padding",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "empty_rows_are_zero",
        "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        m = np.max(x, axis=-1, keepdims=True)  # (..., 1) row maximum, -inf for an empty row
        e = np.exp(x - m)  # BUG: -inf - (-inf) = NaN in an all -inf row
        return e / np.sum(e, axis=-1, keepdims=True)  # (..., n)


class Torch(LessonTorch):
    def softmax(self, x):
        m = x.amax(dim=-1, keepdim=True)  # (..., 1) row maximum, -inf for an empty row
        e = torch.exp(x - m)  # BUG: -inf - (-inf) = NaN in an all -inf row
        return e / e.sum(dim=-1, keepdim=True)  # (..., n)


class Sdpa(ScaledDotProductAttention):
    def softmax(self, x):
        m = x.amax(dim=-1, keepdim=True)  # (..., 1) row maximum, -inf for an empty row
        e = torch.exp(x - m)  # BUG: -inf - (-inf) = NaN in an all -inf row
        return e / e.sum(dim=-1, keepdim=True)  # (..., n)


NUMPY = Numpy()
TORCH = Torch()
SDPA = Sdpa()
