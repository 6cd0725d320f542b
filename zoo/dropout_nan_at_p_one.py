"""Inverted dropout that divides by (1 − p) before masking: NaN at p = 1.

Inverted dropout keeps a weight with probability 1 − p and scales it by 1/(1 − p). Written as
``weights.div(1 - p) * keep`` it is right for every p below 1; at p = 1 the division makes every
weight inf and the mask multiplies it by 0, and inf · 0 is NaN. The contract says p = 1 drops
everything, so the output is 0; here it is NaN everywhere, and the NaN reaches the loss. A rate
of 1 is rare by hand but common in sweeps and schedules that anneal dropout to its limit.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-nan-at-p-one",
    title="Dropout divides by (1 − p) before masking, so dropout_p = 1 gives NaN instead of 0",
    category="state",
    symptom="nan",
    lesson="At p = 1 nothing survives: mask first (or special-case p = 1), never multiply a 0 "
           "by 1/(1 − p).",
    source="",
    seen_in="PyTorch's own Dropout before 'Prevent divide by zero in dropout with p=1' "
            "(https://github.com/pytorch/pytorch/pull/1833); Flax's Dropout before 'Handle "
            "edge-case of rate==1.0' (https://github.com/google/flax/pull/2055)",
    caught_by=("dropout_across_rates",),
)


class Sdpa(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        if dropout_p > 0:
            keep = torch.rand_like(weights) >= dropout_p  # (N, ..., H, L, S): kept with prob. 1 - p
            weights = weights.div(1 - dropout_p) * keep  # BUG: at p = 1, inf · 0 = NaN
        return weights


SDPA = Sdpa()
