"""A softcap whose tanh is written with exponentials overflows: (e^{2x} − 1)/(e^{2x} + 1) is ∞/∞.

A kernel without a tanh intrinsic writes it out. For |s / cap| past about 44 in float32 (355 in
float64) e^{2x} is ∞ and the score NaN, and the NaN spreads over the row; random test logits are
far too small to get there, real activations are not.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-softcap-tanh-overflows",
    title="tanh written as (exp(2x) - 1) / (exp(2x) + 1): NaN once the logits are large",
    category="scores",
    symptom="nan",
    lesson="Use a tanh that saturates (or exp of a non-positive argument); test the cap on "
           "logits far past exp's range.",
    source="",
    seen_in="https://github.com/vllm-project/vllm/pull/56579 (an exp-based tanh overflowed to "
            "NaN)",
    caught_by=(
        "matches_reference",
        "lse_matches_output",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Tiles(PagedTiles):
    def tanh(self, x):
        e = torch.exp(2 * x)
        return (e - 1) / (e + 1)  # BUG: inf / inf = NaN for large x


VARLEN = Tiles()
