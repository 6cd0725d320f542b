"""A causal mask one diagonal too wide: ``np.tril(..., k=1)``.

``tril`` keeps the main diagonal by default; ``k=1`` (``diagonal=1`` in torch) also keeps the
diagonal above it, so token i may look at token i + 1 — exactly the token it is trained to
predict. Nothing raises and the mask is still lower-triangular-looking and bool; training loss
drops suspiciously low, and generation, where token i + 1 does not exist yet, is garbage.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="causal-mask-one-too-wide",
    title="Causal mask built with tril(k=1): each token sees the next one",
    category="masking",
    symptom="silent",
    lesson="Build the causal mask with tril's default diagonal (k=0): j <= i, not j <= i + 1.",
    source="seed 003 · Ловушки: «Маска на одну позицию шире»",
    seen_in="hand-written causal masks, where tril and triu offsets are mixed up when "
            "converting between a keep mask (tril) and a forbid mask (triu(k=1))",
    caught_by=(
        "known_answers", "matches_loop_oracle", "prefix_consistency", "causality",
        "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def causal_mask(self, T):
        return np.tril(np.ones((T, T), dtype=bool), k=1)  # BUG: k=1 also keeps j = i + 1


class Torch(LessonTorch):
    def causal_mask(self, T):
        return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)  # BUG: keeps j = i + 1


NUMPY = Numpy()
TORCH = Torch()
