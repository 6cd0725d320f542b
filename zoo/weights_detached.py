"""Attention weights detached, and the output computed from the detached copy.

Attention maps are kept for plotting and analysis, and a stored map that still holds the graph
keeps every activation of the step alive, so it is detached: "we don't need gradients through
attention maps". When the detach is done where the weights are made, the output is computed from
the detached tensor too. The forward is bit-identical, V still gets its gradient, and the loss
still goes down; no gradient ever reaches the scores, so W_q and W_k never learn and the
attention pattern stays what initialisation made it.
"""

import math

import torch

from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="weights-detached",
    title="Attention output computed from detached weights: no gradient reaches Q and K",
    category="gradients",
    symptom="silent",
    lesson="Detach only the copy you store for inspection; the output must be computed from "
           "weights that are still in the graph.",
    source="",
    seen_in="attention modules that save their attention maps for visualisation and detach "
            "them where they are computed, so the output is built from the detached tensor",
    caught_by=("correct_gradients",),
)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores).detach()  # BUG: out of the graph, and used for the output
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


TORCH = Torch()
