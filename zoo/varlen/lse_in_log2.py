"""The LSE returned in base 2: the merge runs on exp2, and its log-sum-exp is stored unconverted.

Kernels compute softmax with ``exp2`` on scores pre-multiplied by log₂e; the output is right, but
an LSE stored without the factor ln 2 is 1/ln 2 ≈ 1.44 times the natural one, and whoever merges
or differentiates with it (ring attention, split-KV, the backward) gets the wrong weights.
"""

import math

import torch

from zoo import Bug
from zoo.varlen.decoys.split_kv import SplitKV

BUG = Bug(
    id="varlen-lse-in-log2",
    title="The returned LSE is in base 2 (exp2 merge) instead of the natural log",
    category="lse",
    symptom="silent",
    lesson="Convert a base-2 LSE by ln 2 before it leaves the kernel; check the LSE, not only "
           "the output.",
    source="",
    seen_in="https://github.com/lightseekorg/tokenspeed/pull/571 (a base-2 prefill stored its "
            "LSE in base-2 units, off by 1/ln 2)",
    caught_by=(
        "lse_matches_output",
        "matches_reference",
        "empty_row_convention",
    ),
)


class Split(SplitKV):
    def merge(self, parts, Hq, sq, Dv, work):
        if not parts:
            return torch.zeros(Hq, sq, Dv, dtype=work), torch.full((Hq, sq), -math.inf,
                                                                  dtype=work)
        lses = torch.stack([l for _, l in parts]) * (1 / math.log(2))  # (splits, Hq, sq), log2
        top = lses.amax(0)
        top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
        lse2 = top + torch.log2(torch.exp2(lses - top).sum(0))  # -inf when every split is empty
        safe = torch.where(torch.isneginf(lse2), torch.zeros_like(lse2), lse2)
        w = torch.exp2(lses - safe)
        o = (w[..., None] * torch.stack([o for o, _ in parts])).sum(0)
        return o, lse2  # BUG: base-2 units; the contract's LSE is lse2 * ln 2


VARLEN = Split()
