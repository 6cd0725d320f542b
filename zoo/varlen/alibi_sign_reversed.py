"""ALiBi with the sign reversed: ``+slope·|d − j|`` rewards distant keys.

ALiBi penalises distance. With the sign flipped the far past gets the largest scores; the
output stays finite and smooth, and only a comparison with an independent bias shows it.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-alibi-sign-reversed",
    title="ALiBi bias added as +slope·|d - j|: distant keys are favoured",
    category="scores",
    symptom="silent",
    lesson="ALiBi subtracts slope·distance; check the bias against an explicit float bias.",
    source="",
    seen_in="https://github.com/meta-pytorch/attention-gym/pull/86 (the ALiBi score_mod example "
            "had its sign reversed)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def bias(self, alibi_slopes, b, h, sq, sk, work):
        if alibi_slopes is None:
            return None
        slope = alibi_slopes[b, h] if alibi_slopes.dim() == 2 else alibi_slopes[h]
        distance = (self.diagonal(sq, sk) - torch.arange(sk)[None, :]).abs()
        return slope.to(work) * distance  # BUG: + slope·distance, a reward for distance


VARLEN = Loop()
