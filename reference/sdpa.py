"""``torch.nn.functional.scaled_dot_product_attention``'s documented semantics, written out.

The lesson's attention with PyTorch's extra arguments: a float mask, ``is_causal``, ``scale``,
dropout and grouped-query heads. Each step — scores, bias, weights, sharing key/value heads — is
a method, so a zoo entry can get exactly one of them wrong.
``attnzoo check reference/sdpa.py:scaled_dot_product_attention`` comes out clean.
"""

import math

import torch

from reference.lesson_torch import LessonTorch


class ScaledDotProductAttention(LessonTorch):
    """Callable with F.scaled_dot_product_attention's signature; returns the output only."""

    def __call__(
        self,
        query,
        key,
        value,
        attn_mask=None,
        dropout_p=0.0,
        is_causal=False,
        scale=None,
        enable_gqa=False,  # pragma: no mutate (True shares heads in groups of 1 when H_q == H_kv)
    ):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        scores = self.scores(query, key, scale)  # (N, ..., H, L, S)
        scores = scores + self.bias(attn_mask, is_causal, L, S, query)  # -inf where forbidden
        weights = self.weights(scores, dropout_p)  # (N, ..., H, L, S), empty rows are 0
        return weights @ value  # (N, ..., H, L, Ev)

    def scores(self, query, key, scale):
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale  # 1/√E by default
        # scale before the product, as torch's math backend does: in float16 a raw q·k past
        # 65504 is inf before a scale after it could bring it back
        return (query * factor) @ key.transpose(-2, -1)  # (N, ..., H, L, S)

    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)  # rows sum to 1, empty rows are 0
        # dropout with p = 0 is the identity, so '>= 0' would be the same function
        if dropout_p > 0:  # pragma: no mutate
            weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
        return weights

    def bias(self, attn_mask, is_causal, L, S, query):
        # (L, S) zeros on the query's device, in its dtype; a (S,) row would broadcast the same
        bias = query.new_zeros(L, S)  # pragma: no mutate
        if is_causal:
            allowed = query.new_ones(L, S, dtype=torch.bool).tril()  # top-left
            bias = bias.masked_fill(~allowed, -math.inf)
        if attn_mask is None:
            return bias
        if attn_mask.dtype == torch.bool:
            return torch.where(attn_mask, bias, -math.inf)  # (..., L, S): False -> -inf
        return bias + attn_mask  # a float mask is added to the scores

    def share_kv_heads(self, query, key, value):
        group = query.shape[-3] // key.shape[-3]  # g query heads per key/value head
        key = key.repeat_interleave(group, dim=-3)  # (N, ..., H_q, S, E): head j -> j*g .. j*g+g-1
        value = value.repeat_interleave(group, dim=-3)  # (N, ..., H_q, S, Ev)
        return key, value


scaled_dot_product_attention = ScaledDotProductAttention()
