"""``dropout_p`` is accepted and ignored: no dropout, ever.

A generated kernel copies ``F.scaled_dot_product_attention``'s signature and implements the
inference path only. Every evaluation runs it with ``dropout_p = 0`` (or under ``eval()``,
where callers pass 0), so every answer checked is right; a model trained with it silently has
no attention dropout, and its regularisation is gone.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-argument-ignored",
    title="dropout_p accepted and ignored: attention weights never dropped",
    category="generated",
    symptom="silent",
    lesson="Honour every argument a signature accepts, or raise on the ones not implemented; "
           "check dropout_p > 0 as well as 0.",
    source="",
    seen_in="generated kernels checked only on the benchmark's own call, which for "
            "KernelBench's SDPA problem passes no dropout "
            "(https://github.com/ScalingIntelligence/KernelBench/issues/165 discusses what "
            "that check accepts); robust-kbench (https://arxiv.org/abs/2509.14279) reports "
            "kernels specialised to the benchmark's inputs",
    caught_by=(
        "dropout_across_rates", "dropout_follows_the_seed", "dropout_is_inverted",
        "dropout_pattern_is_independent", "dropout_backward_uses_forward_mask",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        return self.softmax(scores)  # BUG: dropout_p never read


SDPA = Sdpa()
