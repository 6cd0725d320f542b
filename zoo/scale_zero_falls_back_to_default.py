"""``scale or 1/√E``: a scale of 0.0 is falsy, so it silently becomes the default.

The idiom ``x = x or default`` reads well and is wrong for numbers: ``0.0 or d`` is ``d``. With
``scale=0.0`` every score should be 0 and every row uniform over its allowed keys; this code
attends as if no scale had been passed. Every test that passes ``None`` or a positive scale is
happy, which is all of them until someone sweeps the scale down to zero.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scale-zero-falls-back-to-default",
    title="scale=0.0 replaced by the default 1/√E because 0.0 is falsy",
    category="scaling",
    symptom="silent",
    lesson="Test 'scale is None', never the truthiness of a number that may be zero.",
    source="",
    seen_in="`scale = scale or 1 / math.sqrt(E)` in hand-written attention wrappers; the same "
            "idiom for dropout rates, temperatures and epsilons",
    caught_by=("matches_loop_oracle", "scores_scaled_by_rsqrt_dk"),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = scale or query.shape[-1] ** -0.5  # BUG: scale=0.0 is falsy and becomes 1/√E
        return query @ key.transpose(-2, -1) * factor  # (N, ..., H, L, S)


SDPA = Sdpa()
