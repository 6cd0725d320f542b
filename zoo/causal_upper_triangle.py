"""The causal mask built with `triu`: the future instead of the past.

"Mask the upper triangle" is how the causal mask is usually described, and `triu` is the
function named after the upper triangle — but the mask here is True where attending is
*allowed*, which is the lower triangle. With `triu` each token sees itself and everything after
it: the last token sees only itself, the first sees the whole sequence. The diagonal survives,
so no row is empty, nothing is NaN and every row sums to 1.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="causal-upper-triangle",
    title="Causal mask built with triu: each token sees the future, not the past",
    category="masking",
    symptom="silent",
    lesson="A keep-mask is the lower triangle, tril: True where j <= i.",
    source="seed 003 · Причинная маска · Как: «np.tril(...) — True там, куда смотреть можно»",
    seen_in="code that mixes up the two mask conventions: triu gives the positions to block "
            "(what masked_fill wants), tril the positions to keep (what where and SDPA's bool "
            "mask want)",
    caught_by=("known_answers", "matches_loop_oracle", "prefix_consistency", "causality"),
)


class Numpy(LessonNumpy):
    def causal_mask(self, T):
        return np.triu(np.ones((T, T), dtype=bool))  # BUG: (T, T) True on and above the diagonal


class Torch(LessonTorch):
    def causal_mask(self, T):
        return torch.ones(T, T, dtype=torch.bool).triu()  # BUG: (T, T) True on and above the diag.


NUMPY = Numpy()
TORCH = Torch()
