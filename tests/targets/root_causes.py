"""SDPA-style callables with one root cause each (and one with two), for the diagnosis tests.

Each subclasses the reference and gets exactly one step wrong, the way real libraries have:
- ``finite_fill``: masked scores replaced by a large finite negative value, so a row with no
  allowed key becomes the uniform average of every value instead of zeros;
- ``gqa_modulo``: grouped-query heads shared as h mod H_kv (``repeat``) instead of h // g;
- ``causal_ignores_rectangular``: the causal mask aligned bottom-right, which only differs
  from SDPA's top-left when L ≠ S;
- ``gqa_crashes``: grouped-query calls, which its signature offers, raise;
- ``two_causes``: both ``finite_fill`` and ``gqa_modulo``;
- ``float64_as_float32``: float64 inputs answered in float32, as a library whose default
  float type is float32 does (keras' ``floatx``);
- ``correct``: the reference itself.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention


class FiniteFill(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        # forbidden scores replaced by the dtype's lowest finite value, as many libraries do:
        # exact where a row keeps a key, the uniform average where it keeps none
        low = torch.finfo(scores.dtype).min
        return super().weights(scores.masked_fill(scores == -math.inf, low), dropout_p)


class GqaModulo(ScaledDotProductAttention):
    def share_kv_heads(self, query, key, value):
        group = query.shape[-3] // key.shape[-3]
        repeats = (1,) * (key.ndim - 3) + (group, 1, 1)
        return key.repeat(repeats), value.repeat(repeats)  # head h reads h mod H_kv


class CausalBottomRight(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = super().bias(attn_mask, False, L, S, query)
        if is_causal:
            allowed = query.new_ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
            bias = bias.masked_fill(~allowed, -math.inf)
        return bias


class GqaCrashes(ScaledDotProductAttention):
    def share_kv_heads(self, query, key, value):
        raise RuntimeError("expected key and value to have as many heads as query")


class TwoCauses(FiniteFill, GqaModulo):
    pass


finite_fill = FiniteFill()
gqa_modulo = GqaModulo()
causal_ignores_rectangular = CausalBottomRight()
gqa_crashes = GqaCrashes()
two_causes = TwoCauses()


def float64_as_float32(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                       scale=None, enable_gqa=False):
    out = correct(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return out.float() if out.dtype == torch.float64 else out
correct = ScaledDotProductAttention()
