"""Keys and values padded to a multiple of 64 with NaN: any S off the tile gives NaN.

A generated kernel pads K and V up to a whole tile and fills the padding with NaN "so that a
bug shows", then masks the padded keys' scores to −∞ before the softmax. The weights of the
padded keys are 0 — but 0 × NaN is NaN, and the padded value rows carry it into every output.
At S = 512 there is no padding and the kernel is right; at any other length every output is
NaN, which a checker that compares with ``not (err > tol)`` or treats NaN as a wildcard
accepts too.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

TILE = 64  # keys per tile

BUG = Bug(
    id="key-padding-filled-with-nan",
    title="Keys and values padded with NaN to a multiple of 64: 0 × NaN poisons every output",
    category="generated",
    symptom="nan",
    lesson="Pad with values whose product with a zero weight is zero (0, not NaN), and test "
           "lengths off every tile size; a check must fail on NaN, not skip it.",
    source="",
    seen_in="NaN used as a wildcard to pass a checker "
            "(https://github.com/gpu-mode/pygpubench/pull/7); NaN-poisoned padding is the "
            "defence the research notes propose against out-of-bounds reads",
    caught_by=(
        "known_answers", "causal_alignment", "gqa_head_mapping", "matches_loop_oracle",
        "weights_are_distributions", "dropout_across_rates", "dropout_follows_the_seed",
        "dropout_is_inverted", "dropout_pattern_is_independent", "empty_rows_are_zero",
        "low_precision_agreement", "correct_gradients", "dropout_backward_uses_forward_mask",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        pad = -S % TILE
        fill = (0, 0, 0, pad)
        key = torch.nn.functional.pad(key, fill, value=math.nan)  # (N, ..., H, S + pad, E)
        value = torch.nn.functional.pad(value, fill, value=math.nan)  # BUG: 0 × NaN is NaN
        scores = self.scores(query, key, scale)  # (N, ..., H, L, S + pad)
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S)
        bias = torch.nn.functional.pad(bias, (0, pad), value=-math.inf)  # padding masked
        scores = torch.where(bias == -math.inf, -math.inf, scores + bias)  # NaN scores masked
        weights = self.weights(scores, dropout_p)  # (N, ..., H, L, S + pad)
        return weights @ value  # (N, ..., H, L, Ev)


SDPA = Sdpa()
