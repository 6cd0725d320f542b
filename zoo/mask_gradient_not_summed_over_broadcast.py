"""A float mask's gradient kept from one broadcast copy instead of summed over all of them.

A learnable additive bias (relative positions, ALiBi slopes, a per-head gate) is usually shared:
an (L, S) bias serves every batch item and head, a (N, 1, L, S) one every head. Its gradient
is then dS summed over the copies it was broadcast into. A fused backward that writes dbias
tile by tile, one program per (item, head), writes every copy to the same place; the last one
to finish wins, and the bias learns from one item and one head instead of all of them. Where
the bias is not broadcast — a full (N, H, L, S) one, which is what kernel tests tend to
build — the gradient is exact, and query, key and value are never affected.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="mask-gradient-not-summed-over-broadcast",
    title="A broadcast float mask's gradient is one copy's dS, not the sum over all copies",
    category="gradients",
    symptom="silent",
    lesson="The gradient of a broadcast input is summed over every axis it was broadcast along.",
    source="",
    seen_in="fused kernels with a learnable attention bias, e.g. flash-sparse-attention, whose "
            "dbias for a bias broadcast over queries collapsed the rows by whichever wrote "
            "last until https://github.com/HKUSTDial/flash-sparse-attention/pull/194",
    caught_by=("gradients_of_every_input",),
)


class Sdpa(HandWrittenBackward):
    def grad_bias(self, grad_scores, shape):
        while grad_scores.dim() > len(shape):
            grad_scores = grad_scores[-1]  # BUG: the last item's (head's) dS overwrites the rest
        for axis, n in enumerate(shape):
            if n == 1 and grad_scores.shape[axis] != 1:
                last = grad_scores.shape[axis] - 1
                grad_scores = grad_scores.narrow(axis, last, 1)  # BUG: one copy, not the sum
        return grad_scores  # (..., L, S) as the bias


SDPA = Sdpa()
