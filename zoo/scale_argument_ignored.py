"""The ``scale`` argument accepted and ignored: always 1/√E.

A drop-in replacement for F.scaled_dot_product_attention copies the signature so callers keep
working, and hard-codes the default. Nearly every caller passes no scale, so nothing shows —
until a model that needs another one (µP's 1/E, a softcapped or temperature-scaled head, the
query pre-scaled by the caller with ``scale=1``) gets the default silently.
"""

import math

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scale-argument-ignored",
    title="scale argument ignored: scores always multiplied by 1/√E",
    category="scaling",
    symptom="silent",
    lesson="Honour every argument a signature accepts; use 1/√E only when scale is None.",
    source="",
    seen_in="hand-written replacements and custom kernels that mirror "
            "F.scaled_dot_product_attention's signature but implement only the default path",
    caught_by=(
        "matches_loop_oracle", "scores_scaled_by_rsqrt_dk", "low_precision_agreement",
        "correct_gradients",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1 / math.sqrt(query.shape[-1])  # BUG: scale is never read
        return query @ key.transpose(-2, -1) * factor  # (N, ..., H, L, S)

SDPA = Sdpa()
