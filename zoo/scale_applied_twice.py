"""The scale applied twice: once to the query, once to the scores.

Pre-multiplying the query by the scale is a common optimisation — L·E multiplications instead
of L·S, and smaller numbers going into a low-precision matmul. It is correct on its own; the
bug appears when the step is added to code that already scales the scores (or the scores line
is copied back from a reference implementation). The scores are then multiplied by 1/E instead
of 1/√E — or by scale² — flatter attention with the right shapes, masks and row sums.
"""

import math

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scale-applied-twice",
    title="Query pre-scaled and the scores scaled again",
    category="scaling",
    symptom="silent",
    lesson="Apply the scale exactly once: to the query or to the scores, not both.",
    source="",
    seen_in="kernels that fold the scale into q for speed or precision while the scores line "
            "still multiplies by it; refactors that move the scale and leave the old one behind",
    caught_by=(
        "known_answers", "gqa_head_mapping", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk",
        "shift_invariance", "low_precision_agreement", "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        query = query * factor  # (N, ..., H, L, E), scaled once here
        return query @ key.transpose(-2, -1) * factor  # BUG: (N, ..., H, L, S), scaled again

SDPA = Sdpa()
