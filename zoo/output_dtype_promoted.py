"""Scaling by ``np.sqrt(d_k)``: float32 in, float64 out.

The lesson's own NumPy listing divides by ``np.sqrt(d_k)``, and the line reads exactly like the
formula. But ``d_k`` is a Python int and ``np.sqrt`` of it is a ``np.float64`` scalar, not a
Python float. Under NumPy 2's promotion rules (NEP 50) a NumPy scalar keeps its dtype, so
float32 scores divided by it become float64, and so do the weights and the output. The numbers
are, if anything, more accurate, so no value test minds; the model silently runs its attention
at double the memory and a fraction of the speed, and the dtype leaks into everything after it.
``math.sqrt`` returns a Python float, which adopts the array's dtype.
"""

import numpy as np

from reference.lesson_numpy import LessonNumpy
from zoo import Bug

BUG = Bug(
    id="output-dtype-promoted",
    title="np.sqrt(d_k) promotes float32 attention to float64",
    category="precision",
    symptom="silent",
    lesson="Scale by a Python float (math.sqrt(d_k)); a NumPy float64 scalar promotes float32 "
           "arrays under NumPy 2.",
    source="seed 003 · Зачем делить на √d_k, «Проверим числами»: «softmax(s / np.sqrt(d_k))»",
    seen_in="NumPy attention code written with np.sqrt on an integer dimension, which NumPy 2's "
            "promotion rules (NEP 50) turned from float32-preserving into float64-producing",
    caught_by=("dtype_follows_input",),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)  # BUG: np.float64 promotes float32
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), float64 whatever came in
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


NUMPY = Numpy()
