"""A softcap backward without the cap's derivative: dS reaches dQ and dK as if uncapped.

The forward caps ``c·tanh(s/c)`` correctly; the backward must multiply dS by ``1 − tanh²(s/c)``
before it becomes dQ and dK. A varlen backward that was never given the softcap path passes dS
through unchanged. The forward, dV and every uncapped call are right, so only a gradient check
with a cap that bends the scores sees it.
"""

from zoo import Bug
from zoo.varlen.decoys.recomputing_backward import RecomputingBackward

BUG = Bug(
    id="varlen-softcap-backward-drops-tanh-derivative",
    title="Backward passes dS through the softcap unchanged: the (1 - tanh^2) factor is missing",
    category="scores",
    symptom="silent",
    lesson="Differentiate through the cap: dS times 1 - tanh^2(s/c); check gradients with a "
           "cap small enough to bend the scores.",
    source="",
    seen_in="https://github.com/Dao-AILab/flash-attention/pull/2544 (softcap was not supported "
            "in the varlen backward yet not guarded: dQ failed validation)",
    caught_by=(
        "gradients_match_reference",
    ),
)


class Kernel(RecomputingBackward):
    def through_cap(self, ds, t):
        return ds  # BUG: the cap's derivative 1 - tanh² is left out


VARLEN = Kernel()
