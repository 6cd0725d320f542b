"""Q·Kᵀ formed in float16 before the scale: inf where the scaled scores are moderate.

Models with large activations (outlier features of a few hundred) give raw dot products past
float16's largest finite value, 65504, while the scaled scores stay small. Multiplying by the
scale after the product is too late: the product is already inf, inf − inf in the softmax is
NaN, and the whole row is lost. torch's math backend scales the query (and key) first for this
reason, and so does this repository's reference — it did not, until the deeper battery's
float16-magnitude case showed it. At the quick battery's magnitudes every product is small.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scores-overflow-half",
    title="Raw Q·Kᵀ computed in float16 before scaling overflows to inf",
    category="precision",
    symptom="nan",
    lesson="Scale the query (or accumulate in float32) before the product, so only the scaled "
           "scores need to fit the input's precision.",
    source="",
    seen_in="attention written as (q @ k.transpose(-2, -1)) * scale and run in float16 on "
            "models with large activations; this repository's reference/sdpa.py had it, and "
            "torch's math backend scales before the product to avoid it",
    caught_by=("low_precision_agreement",),
    depth="standard",
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1 / (query.shape[-1] ** 0.5) if scale is None else scale
        return query @ key.transpose(-2, -1) * factor  # BUG: the raw product overflows float16


SDPA = Sdpa()
