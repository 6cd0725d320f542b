"""Dropout applied to the scores instead of the weights.

"Attention dropout" drops attention *weights*: after softmax, so that a dropped key contributes
nothing and the survivors are scaled by 1/(1 − p). Moved one line up, onto the scores, the same
``F.dropout`` does something else: a dropped score becomes 0, an ordinary score that still gets
weight e⁰ (the mask-fill-zero mistake, at random), the kept scores are multiplied by 1/(1 − p),
which sharpens the softmax, and softmax renormalises the row anyway. No weight is ever exactly
zero and every row still sums to 1, so the output looks like attention with a little noise.
"""


import torch.nn.functional as F

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-before-softmax",
    title="Dropout applied to the attention scores before softmax",
    category="state",
    symptom="silent",
    lesson="Drop attention weights after softmax; dropout on the scores zeroes logits "
           "(weight e⁰) and sharpens the rest.",
    source="",
    seen_in="from-scratch attention where the dropout line lands right after the score "
            "matmul; confusion between attention dropout and methods that drop keys before "
            "softmax on purpose",
    caught_by=("dropout_is_inverted",),
)


class Sdpa(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        if dropout_p > 0:
            scores = F.dropout(scores, dropout_p)  # BUG: drops scores, not weights
        return self.softmax(scores)  # (N, ..., H, L, S)

SDPA = Sdpa()
