"""Dropout that zeroes weights but does not rescale the survivors.

Hand-rolled dropout is one line, ``weights * (rand_like(weights) >= p)``, and it does zero each
weight with probability p. It forgets the other half of inverted dropout: survivors must be
divided by (1 − p) so that the expected weight, and the expected output, stay what they are
without dropout. Without it every row sums to about 1 − p in training and to 1 at evaluation, so
the next layer sees outputs shrunk by (1 − p) in training and full-size ones at inference.
Nothing crashes, and with ``dropout_p=0`` it is exact.
"""


import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-not-rescaled",
    title="Dropout zeroes attention weights without scaling survivors by 1/(1 − p)",
    category="state",
    symptom="silent",
    lesson="Inverted dropout divides what it keeps by (1 − p); a bare Bernoulli mask shrinks "
           "every training-time output.",
    source="",
    seen_in="hand-written dropout in custom attention kernels and from-scratch transformer "
            "code that multiplies by a Bernoulli mask and stops there",
    caught_by=("dropout_is_inverted",),
)


class Sdpa(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        if dropout_p > 0:
            keep = torch.rand_like(weights) >= dropout_p  # (N, ..., H, L, S): kept with prob. 1 - p
            weights = weights * keep  # BUG: survivors are not scaled by 1/(1 - p)
        return weights

SDPA = Sdpa()
