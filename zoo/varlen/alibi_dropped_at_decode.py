"""ALiBi dropped on the decode path: a call with one query per sequence gets no bias.

Serving stacks route decode (one new token per sequence) to a kernel of its own; when that path
forgets the slopes, prefill is right and every generated token is attended without its
position bias. A test that only runs prefill, or compares decode with nothing, cannot see it.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-alibi-dropped-at-decode",
    title="ALiBi slopes ignored when every sequence has one query (the decode path)",
    category="scores",
    symptom="silent",
    lesson="Give the decode path the same score modification as prefill; check decode against "
           "the last row of a prefill.",
    source="",
    seen_in="https://github.com/HabanaAI/vllm-fork/pull/437 (ALiBi dropped in the flat paged "
            "attention decode path; MPT generated garbage)",
    caught_by=(
        "alibi_is_a_float_bias",
        "decode_matches_prefill",
        "matches_reference",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def bias(self, alibi_slopes, b, h, sq, sk, work):
        if alibi_slopes is None or sq == 1:  # BUG: the decode path forgets the slopes
            return None
        slope = alibi_slopes[b, h] if alibi_slopes.dim() == 2 else alibi_slopes[h]
        return -slope.to(work) * (self.diagonal(sq, sk) - torch.arange(sk)[None, :]).abs()


VARLEN = Loop()
