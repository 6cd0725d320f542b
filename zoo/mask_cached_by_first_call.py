"""A causal mask cached at the longest length seen, sliced with the decoding formula.

Building ``tril(ones(T, T))`` on every call looks wasteful, so the mask is built once and kept,
like a ``register_buffer`` of the maximum length: built by the first call, rebuilt only when a
longer sequence arrives, sliced for shorter ones. The slice is borrowed from KV-cached decoding,
where the T new queries are the *last* T positions: ``mask[-T:, :T]``. That is right only when
T is the buffer's length. After a longer call, query i of a shorter sequence gets row
``i + (T_max − T)`` and sees that many future tokens. Sequences that arrive shortest first, as in
most tests, are all right; once a long one has been seen, every shorter one looks ahead.
"""

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="mask-cached-by-first-call",
    title=("Causal mask built by the first call, kept, and sliced from the wrong end for "
           "shorter calls"),
    category="state",
    symptom="silent",
    lesson="Slice a cached (T_max, T_max) causal mask as mask[:T, :T]; the last rows belong to "
           "decoding, where queries follow cached keys.",
    source="",
    seen_in="attention modules that keep a causal mask buffer of the largest length seen and "
            "slice it for each call, mixing the self-attention slice with the KV-cache slice "
            "used when decoding",
    caught_by=("matches_loop_oracle", "causality", "call_order_independence"),
)


class Numpy(LessonNumpy):
    def causal_mask(self, T):
        if "_mask" not in self.__dict__ or len(self._mask) < T:  # built once, grown when needed
            self._mask = np.tril(np.ones((T, T), dtype=bool))  # (T_max, T_max)
        return self._mask[-T:, :T]  # BUG: the last T rows: right only for T == T_max


class Torch(LessonTorch):
    def causal_mask(self, T):
        if "_mask" not in self.__dict__ or len(self._mask) < T:  # built once, grown when needed
            self._mask = torch.ones(T, T, dtype=torch.bool).tril()  # (T_max, T_max)
        return self._mask[-T:, :T]  # BUG: the last T rows: right only for T == T_max


NUMPY = Numpy()
TORCH = Torch()
