"""Keys and values flattened to (-1, d) "to keep the matmul 2-D".

The code was written for one sequence, where K is (T_k, d) and `Q @ K.T` is a plain matrix
product. To accept batches without touching the transpose, K and V get a
`reshape(-1, d)` — which pools the keys of every item (and every head) into one (B·T_k, d)
table. Each query now attends to all B·T_k keys: item 0 reads item 1's values. The mask, sized
for T_k keys, is tiled once per pooled block so the shapes fit again. A single sequence is
unchanged, so the lesson's examples pass; the output has the right shape, the rows of weights
still sum to 1, and nothing crashes — only the weights come back B times too wide.
"""

import math

import numpy as np
import torch

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="keys-flattened-across-batch",
    title="Keys and values reshaped to (-1, d): every query attends to every item's keys",
    category="shapes",
    symptom="silent",
    lesson="Keep the batch axes on K and V; let @ broadcast them instead of flattening them away.",
    source="",
    seen_in="single-sequence attention code extended to batches with a reshape(-1, d) or "
            "view(-1, d) so that a 2-D transpose (K.T, torch.mm) keeps working",
    caught_by=(
        "matches_loop_oracle", "output_is_weighted_values", "weights_are_distributions",
        "batch_consistency", "head_independence", "mask_poisoning", "empty_rows_are_zero",
    ),
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        keys = K.reshape(-1, d_k)  # BUG: (B·T_k, d_k): the keys of every item in one table
        values = V.reshape(-1, V.shape[-1])  # BUG: (B·T_k, d_v): the values likewise
        scores = Q @ keys.T / math.sqrt(d_k)  # (..., T_q, B·T_k)
        if mask is not None:
            blocks = keys.shape[0] // K.shape[-2]  # how many T_k-blocks were pooled
            mask = np.concatenate([mask] * blocks, axis=-1)  # (..., T_q, B·T_k): tiled to fit
            scores = np.where(mask, scores, -np.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, B·T_k): rows sum to 1 over all items
        return weights @ values, weights  # (..., T_q, d_v), (..., T_q, B·T_k)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        keys = K.reshape(-1, d_k)  # BUG: (B·T_k, d_k): the keys of every item in one table
        values = V.reshape(-1, V.shape[-1])  # BUG: (B·T_k, d_v): the values likewise
        scores = Q @ keys.T / math.sqrt(d_k)  # (..., T_q, B·T_k)
        if mask is not None:
            blocks = keys.shape[0] // K.shape[-2]  # how many T_k-blocks were pooled
            mask = torch.cat([mask] * blocks, dim=-1)  # (..., T_q, B·T_k): tiled to fit
            scores = torch.where(mask, scores, float("-inf"))  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, B·T_k): rows sum to 1 over all items
        return weights @ values, weights  # (..., T_q, d_v), (..., T_q, B·T_k)


NUMPY = Numpy()
TORCH = Torch()
