"""Masked scores filled with −1e9 instead of −∞.

The workaround the lesson itself mentions for rows that padding closes completely: with −∞ a
naive softmax computes 0/0, with −1e9 it does not. But −1e9 is a score, not an absence. In a
row with at least one allowed key it still underflows to weight 0, so every ordinary test
passes; in a row with no allowed key every score is −1e9, and softmax spreads the row evenly
over keys nobody may see. The output row becomes the mean of forbidden values — finite,
plausible and wrong. (Written with ``masked_fill``, −1e9 also raises in float16: that is
mask-fill-overflows-half. Here it goes through ``where``, which rounds it to −∞ in float16.)
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

NEG = -1e9  # "minus infinity" as many codebases write it

BUG = Bug(
    id="large-negative-fill",
    title="Masked scores filled with −1e9: an empty row averages forbidden values",
    category="masking",
    symptom="silent",
    lesson="Fill with −∞ and let softmax return 0 for an all −∞ row; −1e9 spreads an empty row.",
    source="seed 003 · Ловушки: «Полностью закрытая строка»",
    seen_in="scores.masked_fill(mask == 0, -1e9) in tutorial transformer code and its many "
            "descendants; padding masks that close a whole row (a batch item that is all padding)",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "mask_poisoning",
        "empty_rows_are_zero", "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, NEG)  # BUG: a finite fill, not -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), an empty row is uniform
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, NEG)  # BUG: a finite fill, not -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), an empty row is uniform
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # top-left
            bias = torch.where(allowed, bias, NEG)  # BUG: a finite fill, not -inf
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, bias, NEG)  # BUG: (..., L, S), False -> -1e9
        return bias + attn_mask  # a float mask is added to the scores


NUMPY = Numpy()
TORCH = Torch()
SDPA = Sdpa()
