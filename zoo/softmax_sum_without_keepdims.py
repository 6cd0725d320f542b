"""Softmax divided by a row sum taken without ``keepdims``.

``e.sum(axis=-1)`` has shape (..., T_q), one sum per row; broadcasting lines it up with the
last axis of ``e``, not with the rows. On a square matrix — every self-attention score matrix —
element (i, j) is divided by row j's sum, so the columns are scaled instead of the rows:
numbers of the right shape, rows that no longer sum to 1, no error. On a 1-D vector it is even
right, and on a rectangular matrix it raises, which is the only warning anyone gets.
"""

import numpy as np

from reference.lesson_numpy import LessonNumpy
from zoo import Bug

BUG = Bug(
    id="softmax-sum-without-keepdims",
    title="Softmax divides by e.sum(axis=-1) without keepdims",
    category="softmax",
    symptom="silent",
    lesson="Keep the reduced axis (keepdims=True) so each row is divided by its own sum.",
    source="",
    seen_in="vectorising a 1-D softmax, where the sum is a scalar and keepdims does not "
            "matter; square self-attention scores hide the mistake",
    caught_by=("known_answers", "prefix_consistency"),
)


class Numpy(LessonNumpy):
    def softmax(self, x):
        m = np.max(x, axis=-1, keepdims=True)  # (..., 1) row maximum
        m = np.where(np.isneginf(m), 0.0, m)  # an all -inf row has no maximum to subtract
        e = np.exp(x - m)  # (..., T, n) in [0, 1], exactly 0 at -inf
        total = np.sum(e, axis=-1)  # BUG: (..., T), no keepdims; it broadcasts along n
        return e / np.where(total == 0.0, 1.0, total)  # (..., T, n): e[i, j] / total[j]


NUMPY = Numpy()
