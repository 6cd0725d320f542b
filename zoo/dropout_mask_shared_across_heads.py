"""One dropout mask drawn per batch item and broadcast over every head.

Drawing the Bernoulli mask as ``torch.rand(N, 1, L, S)`` (or a kernel whose random-number
offset is computed from the batch index and the position but not the head) drops the same
weights in every head. The keep rate is exactly 1 − p and every survivor is scaled by 1/(1 − p),
so each check of one head at a time passes; but the heads no longer regularise independently:
a key dropped for one head is dropped for all of them, which is a different (and stronger)
regulariser than the one the model was tuned with.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-mask-shared-across-heads",
    title="The dropout mask is drawn once per batch item and broadcast over the heads",
    category="state",
    symptom="silent",
    lesson="Draw dropout for every weight of every head; a mask broadcast over an axis makes "
           "that axis drop together.",
    source="",
    seen_in="hand-written attention dropout that draws torch.rand(B, 1, L, S) to save memory, "
            "and fused kernels whose Philox counter offset omits the head index",
    caught_by=("dropout_pattern_is_independent",),
)


class Sdpa(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        if dropout_p > 0:
            draw = torch.rand(weights.shape[:-3] + (1,) + weights.shape[-2:],
                              dtype=weights.dtype, device=weights.device)  # BUG: (N, 1, L, S)
            weights = weights * (draw >= dropout_p) / (1 - dropout_p)  # the same for every head
        return weights


SDPA = Sdpa()
