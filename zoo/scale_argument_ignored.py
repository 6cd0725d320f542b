"""The ``scale`` argument accepted and ignored: always 1/√E.

A drop-in replacement for F.scaled_dot_product_attention copies the signature so callers keep
working, and hard-codes the default. Nearly every caller passes no scale, so nothing shows —
until a model that needs another one (µP's 1/E, a softcapped or temperature-scaled head, the
query pre-scaled by the caller with ``scale=1``) gets the default silently.
"""

import math

import torch

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
    def __call__(
        self,
        query,
        key,
        value,
        attn_mask=None,
        dropout_p=0.0,
        is_causal=False,
        scale=None,
        enable_gqa=False,
    ):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        factor = 1 / math.sqrt(E)  # BUG: scale is never read
        scores = query @ key.transpose(-2, -1) * factor  # (N, ..., H, L, S)
        scores = scores + self.bias(attn_mask, is_causal, L, S, query)  # -inf where forbidden
        weights = self.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        if dropout_p > 0:
            weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
        return weights @ value  # (N, ..., H, L, Ev)


SDPA = Sdpa()
