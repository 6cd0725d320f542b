"""A custom autograd.Function in einsum whose backward serves every input it was given.

The forward keeps the weights; the backward works from the upstream gradient as autograd hands
it over, by einsum, which reads any strides — transposed, expanded with stride 0, offset — and
never assumes a layout. It computes only the gradients autograd asks for
(``ctx.needs_input_grad``) and returns each summed to its input's shape with ``sum_to_size``,
so a broadcast float mask gets the sum over its copies. Autograd builds the graph whenever any
input requires grad, the mask alone included. With dropout the reference's autograd is used.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Decoy

DECOY = Decoy(
    id="einsum-backward",
    title="Custom autograd.Function in einsum that returns exactly the gradients asked for",
    technique="forward and backward by einsum; gradients only where ctx.needs_input_grad says, "
    "each reduced with sum_to_size; the upstream gradient used in whatever layout it arrives",
    why_correct="einsum reads every layout by its strides, sum_to_size sums a gradient over the "
    "axes its input was broadcast along, and autograd asks for exactly the inputs that need one",
)


class _Einsum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, bias, factor, softmax):
        scores = torch.einsum("...le,...se->...ls", query * factor, key) + bias  # (..., L, S)
        weights = softmax(scores)  # (..., L, S), empty rows are 0
        ctx.save_for_backward(query, key, value, bias, weights)
        ctx.factor = factor
        return torch.einsum("...ls,...sv->...lv", weights, value)  # (..., L, Ev)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, bias, weights = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_weights = torch.einsum("...lv,...sv->...ls", grad_out, value)  # (..., L, S)
        rowsum = torch.einsum("...ls,...ls->...l", weights, grad_weights)[..., None]
        grad_scores = weights * (grad_weights - rowsum)  # (..., L, S)
        factor = ctx.factor
        grads = (
            torch.einsum("...ls,...se->...le", grad_scores, key) * factor if need[0] else None,
            torch.einsum("...ls,...le->...se", grad_scores, query) * factor if need[1] else None,
            torch.einsum("...ls,...lv->...sv", weights, grad_out) if need[2] else None,
            grad_scores if need[3] else None,
        )
        inputs = (query, key, value, bias)
        return tuple(None if g is None else g.sum_to_size(x.shape) for g, x in zip(grads, inputs)) \
            + (None, None)


class EinsumBackward(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        if dropout_p > 0:  # the dropout mask would have to be kept: the reference's autograd
            return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                    enable_gqa)
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        return _Einsum.apply(query, key, value, bias, factor, self.softmax)


SDPA = EinsumBackward()
