"""A bool mask read with the opposite convention: True taken to mean "forbidden".

``F.scaled_dot_product_attention`` and the lesson read True as "may attend";
``nn.MultiheadAttention`` (and ``masked_fill(mask, -inf)``) read True as "masked out". Code
moved between the two keeps its masks and silently swaps their meaning: a causal mask then hides
the past and the token itself and shows only the future, and a padding mask attends only to the
padding. The last row of a causal mask has no future to look at, so it is empty and comes out
as zeros — no NaN, no error.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="mask-convention-inverted",
    title="Bool mask True read as 'forbidden' (nn.MultiheadAttention's convention)",
    category="masking",
    symptom="silent",
    lesson="Check which convention a bool mask uses: for SDPA and here True means 'may attend'.",
    source="seed 003 · Ловушки: «Разные соглашения о True»",
    seen_in="code ported between nn.MultiheadAttention (True = masked out) and "
            "F.scaled_dot_product_attention (True = may attend), and masked_fill(mask, -inf) "
            "applied to a keep mask",
    caught_by=(
        "known_answers", "matches_loop_oracle", "weights_are_distributions", "mask_forms_agree",
        "causality", "mask_poisoning", "empty_rows_are_zero", "low_precision_agreement",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, -np.inf, scores)  # BUG: True taken as "forbidden"
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # BUG: True taken as "forbidden"
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


class Sdpa(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)  # (L, S)
        if is_causal:
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # top-left
            bias = bias.masked_fill(~allowed, float("-inf"))
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, float("-inf"), bias)  # BUG: True -> -inf, the drop rule
        return bias + attn_mask  # a float mask is added to the scores


NUMPY = Numpy()
TORCH = Torch()
SDPA = Sdpa()
