"""The causal mask with `k=-1`: a token may not attend to itself.

"A token must not see the answer" slides into "a token must not see itself", and the diagonal
goes with `np.tril(..., k=-1)`. Every token now mixes only the tokens before it, and the first
token has nothing at all: its row is empty, so it gets zero weights and a zero output (or NaN,
with a softmax that does not guard empty rows). Causality still holds — nothing later is ever
seen — so a check that only asks "no future" passes.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="causal-excludes-diagonal",
    title="Causal mask with k=-1: the diagonal is masked and the first row is empty",
    category="masking",
    symptom="silent",
    lesson="A causal mask keeps the diagonal: token i sees j <= i, itself included.",
    source="seed 003 · Причинная маска · Зачем: «токен i смотрит только на позиции j <= i»",
    seen_in="off-by-one edits of tril's diagonal argument; masks derived from shifted "
            "next-token targets, where the shift is applied twice",
    caught_by=("known_answers", "matches_loop_oracle", "prefix_consistency"),
)


class Numpy(LessonNumpy):
    def causal_mask(self, T):
        return np.tril(np.ones((T, T), dtype=bool), k=-1)  # BUG: (T, T) strictly below the diagonal


class Torch(LessonTorch):
    def causal_mask(self, T):
        return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # BUG: (T, T) strictly below


NUMPY = Numpy()
TORCH = Torch()
