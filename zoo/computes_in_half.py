"""Attention computed in float16 "for speed" and cast back.

Half precision halves memory and, on a GPU, multiplies throughput, so casting Q, K and V to
float16 at the top of attention and the result back to the input dtype at the end looks like a
free speed-up that keeps the interface unchanged. The interface is unchanged; the precision is
not. Float16 has an 11-bit significand: every float32 or float64 answer now carries errors near
1e-3, thousands of times float32's, and the output's dtype hides where they came from. Inputs
beyond 65504 overflow to inf and come back as NaN.
"""

import math

import torch

from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="computes-in-half",
    title="Attention cast to float16 internally and back: float16 error in every dtype",
    category="precision",
    symptom="silent",
    lesson="Compute in the dtype you were given (or higher); casting down inside and back up "
           "hides float16 error behind a float32 dtype.",
    source="",
    seen_in="attention layers and custom kernels that call .half() on their inputs as a speed "
            "optimisation and cast the result back, so callers asking for float32 get float16 "
            "accuracy",
    # its attention's relations are judged at the float16 precision it is measured to have, so
    # the precision detectors report it there; its softmax and self-attention are judged
    # strictly, and mask_poisoning sees its float16 overflow
    caught_by=(
        "known_answers", "matches_loop_oracle", "shift_invariance", "mask_poisoning",
        "computes_at_input_precision", "low_precision_agreement",
    ),
)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        dtype = Q.dtype
        Q, K, V = Q.half(), K.half(), V.half()  # BUG: float16 "for speed", whatever came in
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k) float16
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k) float16
        return (weights @ V).to(dtype), weights.to(dtype)  # (..., T_q, d_v), (..., T_q, T_k)


TORCH = Torch()
