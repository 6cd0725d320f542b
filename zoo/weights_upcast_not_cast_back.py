"""Softmax upcast to float32 for stability; only the product is cast back, the weights are not.

Half-precision attention code often runs the softmax in float32 —
``softmax(scores, dim=-1, dtype=torch.float32)`` — and casts back with ``.to(query.dtype)``
before multiplying by V. Moving the cast onto the product instead (``(weights @ V.float())
.to(V.dtype)``) keeps ``out`` in the input dtype and every value test happy, while the weights
handed back (``output_attentions``, a visualisation, a distillation loss) stay float32: twice
the memory of the largest tensor in the layer, and a dtype mismatch wherever they are combined
with half tensors.
"""

import math

import torch

from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="weights-upcast-not-cast-back",
    title="Softmax in float32 for half inputs: out is cast back, the returned weights are not",
    category="precision",
    symptom="silent",
    lesson="Every tensor you return is an output: cast the weights back to the input dtype, "
           "not only the product.",
    source="",
    seen_in="eager attention paths that upcast the softmax for stability "
            "(softmax(..., dtype=torch.float32), as Hugging Face's eager attention does) and "
            "cast only the product back, so the attention maps they return are float32",
    caught_by=("dtype_follows_input",),
)


class Torch(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)  # forbidden keys score -inf
        work = torch.promote_types(scores.dtype, torch.float32)  # float32 for half inputs
        weights = self.softmax(scores.to(work))  # (..., T_q, T_k) in float32 or float64
        out = (weights @ V.to(work)).to(V.dtype)  # (..., T_q, d_v), cast back
        return out, weights  # BUG: the weights stay float32 for float16/bfloat16 inputs


TORCH = Torch()
