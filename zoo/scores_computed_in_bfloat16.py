"""Q·Kᵀ computed in bfloat16 and cast back: eight bits of mantissa in every dtype.

A generated kernel earns its speedup from tensor cores: it casts query and key to bfloat16 for
the product and casts the scores back to the input's dtype for the softmax. The output has the
input's dtype, so a check that looks at dtypes is satisfied, and with ``torch.rand`` inputs at
E = 1024 the scores are so flat that bfloat16's error of a few parts in a thousand hardly moves
the softmax: ``allclose(1e-2)`` passes. A float32 or float64 caller who wanted float32 accuracy
gets bfloat16's.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scores-computed-in-bfloat16",
    title="Scores computed in bfloat16 and cast back to the input's dtype",
    category="generated",
    symptom="silent",
    lesson="Compute at the input's precision (or say so): compare float32 results against a "
           "float64 reference with a float32 tolerance, not a flat 1e-2.",
    source="",
    seen_in="the precision downgrade that deep-reinforce finds only partially defensible "
            "(https://deep-reinforce.com/defense_kernel_hack.html), one of the patterns in "
            "wafer.ai's field guide (https://www.wafer.ai/blog/reward-hacks-field-guide)",
    caught_by=(
        "computes_at_input_precision", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk",
        "shift_invariance", "low_precision_agreement",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        low = torch.bfloat16  # BUG: the product runs at 8 bits of mantissa
        q, k = query.to(low), key.to(low)
        scaled = super().scores(q, k, scale)  # (N, ..., H, L, S) in bfloat16
        return scaled.to(query.dtype)  # back to the input's dtype, the bits already lost


SDPA = Sdpa()
