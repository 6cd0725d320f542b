"""The lesson contract on NumPy arrays, written like the lesson's math.

The four functions are methods so that a zoo entry can replace exactly one of them and keep the
rest, the way a real module with one wrong line behaves. The module-level names make this file
a lesson-style module itself: ``attnzoo check reference/lesson_numpy.py``.
"""

import math

import numpy as np


class LessonNumpy:
    """softmax(Q Kᵀ / √d_k) V with a causal mask, as in seed 003."""

    def causal_mask(self, T):
        return np.tril(np.ones((T, T), dtype=bool))  # (T, T): True on and below the diagonal

    def softmax(self, x):
        m = np.max(x, axis=-1, keepdims=True)  # (..., 1) row maximum
        # an all -inf row has no maximum: subtract 0 (any finite c: exp(-inf - c) = 0 either way)
        m = np.where(np.isneginf(m), 0.0, m)  # pragma: no mutate
        e = np.exp(x - m)  # (..., n) in [0, 1], exactly 0 at -inf
        total = np.sum(e, axis=-1, keepdims=True)  # (..., 1)
        # an all -inf row stays 0, never 0/0 (dividing its zeros by any non-zero gives 0)
        return e / np.where(total == 0.0, 1.0, total)  # pragma: no mutate

    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), rows sum to 1 (0 if empty)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        T = X.shape[-2]
        return self.attention(Q, K, V, self.causal_mask(T))


_lesson = LessonNumpy()
causal_mask = _lesson.causal_mask
softmax = _lesson.softmax
attention = _lesson.attention
causal_self_attention = _lesson.causal_self_attention
