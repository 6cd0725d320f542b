"""A backward that recomputes the probabilities without the mask: hidden keys get gradient.

The forward masks correctly and saves the LSE; the backward recomputes ``P = exp(S − lse)`` from
scores it never masked, so every key hidden by causal, the window or a sequence's end is given
a probability — and dQ, dK and dV a share of it. Tests of the forward, or of the backward
without a mask, cannot see it.
"""

from zoo import Bug
from zoo.varlen.decoys.recomputing_backward import RecomputingBackward

BUG = Bug(
    id="varlen-backward-ignores-the-mask",
    title="Backward recomputes P from unmasked scores: hidden keys receive gradient",
    category="masking",
    symptom="silent",
    lesson="Apply in the backward the very mask of the forward; check gradients under causal "
           "and windows.",
    source="",
    seen_in="https://github.com/triton-lang/triton/issues/4541 (the fused-attention tutorial's "
            "backward did not follow the causal flag)",
    caught_by=(
        "gradients_match_reference",
    ),
)


class Kernel(RecomputingBackward):
    def recompute(self, qb, kb, b, meta, lse):
        unmasked = dict(meta, causal=False, window=(-1, -1))  # BUG: the forward's mask is lost
        _, s, t = self.scores(qb, kb, b, unmasked)
        return self.probabilities(s, lse), t


VARLEN = Kernel()
