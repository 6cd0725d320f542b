"""Softmax without the max shift: ``exp(s)`` of the raw scores, so a large score overflows.

Subtracting each row's maximum before ``exp`` changes nothing mathematically and keeps every
exponent at most 0. Without it, a score past exp's range (about 88.7 in float32) is inf, and
inf / inf is NaN. Random unit-scale inputs give scores of a few units, and a soft cap bounds
them, so only large uncapped scores (trained models reach them: outlier features, long
contexts) show it.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-softmax-without-max-shift",
    title="exp of the raw scores: a score past exp's range overflows to inf, the row to NaN",
    category="scores",
    symptom="nan",
    lesson="Subtract each row's maximum before exp (and keep the running maximum in an online "
           "softmax); test with scores past exp's range and no cap.",
    source="",
    depth="standard",
    seen_in="https://github.com/NVIDIA/FasterTransformer/issues/43 (the attention softmax "
            "kernel exponentiated unshifted scores and returned NaN for a pretrained model)",
    caught_by=("matches_reference", "gradients_match_reference"),
)


class Loop(SequenceLoop):
    def softmax_times(self, s, v):
        p = torch.exp(s)  # BUG: no max shift: exp(s) is inf once s is past exp's range
        total = p.sum(dim=-1, keepdim=True)
        o = (p @ v) / total.clamp_min(torch.finfo(s.dtype).tiny)
        return o, torch.log(total).squeeze(-1)


VARLEN = Loop()
