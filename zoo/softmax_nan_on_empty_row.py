"""The exported softmax gives NaN on a row of −∞; attention hides it by zeroing closed rows.

``torch.softmax`` returns NaN for a row whose every score is −∞ (PyTorch documents it and
added a ``_safe_softmax`` for SDPA in 2.5), and the textbook ``exp(x − max) / sum`` does the
same. A module that knows this often patches attention rather than the softmax: after the
softmax it sets every row the mask closes to zero, so attention is exact, its padding tests
pass, and the softmax it exports — reused for masked pooling or routing — still returns NaN.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="softmax-nan-on-empty-row",
    title="softmax returns NaN on an all −∞ row; only attention zeroes the closed rows",
    category="softmax",
    symptom="nan",
    lesson="Guard the softmax itself for a row with no finite score; patching its one caller "
           "leaves every other caller with NaN.",
    source="seed 003 · Ловушки: «Полностью закрытая строка»",
    seen_in="modules that call torch.softmax (NaN on a row of −∞, which is why PyTorch 2.5 added "
            "_safe_softmax for SDPA) and zero fully masked rows afterwards with masked_fill, "
            "as several Hugging Face attention paths did for padded batches",
    caught_by=("softmax_of_empty_row_is_zero",),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))  # BUG: an all -inf row is NaN
        return e / np.sum(e, axis=-1, keepdims=True)  # (..., n)

    def attention(self, Q, K, V, mask=None):
        out, weights = super().attention(Q, K, V, mask)  # NaN in rows the mask closes
        if mask is not None:
            closed = ~np.broadcast_to(mask, weights.shape).any(axis=-1, keepdims=True)
            weights = np.where(closed, 0.0, weights).astype(weights.dtype)  # (..., T_q, T_k)
            out = weights @ V  # (..., T_q, d_v)
        return out, weights


class Torch(LessonTorch):
    def softmax(self, x):
        return torch.softmax(x, dim=-1)  # BUG: NaN on a row of -inf

    def attention(self, Q, K, V, mask=None):
        out, weights = super().attention(Q, K, V, mask)  # NaN in rows the mask closes
        if mask is not None:
            closed = ~mask.expand(weights.shape).any(dim=-1, keepdim=True)  # (..., T_q, 1)
            weights = weights.masked_fill(closed, 0.0)  # (..., T_q, T_k)
            out = weights @ V  # (..., T_q, d_v)
        return out, weights


NUMPY = Numpy()
TORCH = Torch()
