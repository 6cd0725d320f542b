"""Shared scaffold for the gradient entries: SDPA as a custom ``torch.autograd.Function``.

Fused attention kernels (flash-attention and every tutorial that rebuilds it) write the backward
pass by hand. The forward keeps P = softmax(S) and the backward rebuilds the gradients from it:

    S = scale · Q Kᵀ + bias     dS = P ⊙ (dP − rowsum(P ⊙ dP))     dbias = dS
    P = softmax(S)              dQ = scale · dS K
    O = P V                     dK = scale · dSᵀ Q
                                dP = dO Vᵀ,   dV = Pᵀ dO

(with dropout, P is replaced by the dropped-out weights in O and dV, and dP is masked the same
way). :class:`HandWrittenBackward` is the reference SDPA with exactly this: its forward is the
reference's arithmetic step for step, and its backward is split into overridable steps —
``read_upstream``, ``grad_value``, ``grad_scores``, ``grad_query_key``, ``grad_bias`` — so that
each gradient entry breaks one of them and nothing else. As it stands it is correct; the leading
underscore keeps it out of the zoo's discovery.
"""

import math

import torch

from reference.sdpa import ScaledDotProductAttention


def reduce_to(grad, shape):
    """Sum a gradient over the axes along which its input was broadcast."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for axis, n in enumerate(shape):
        if n == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis, keepdim=True)
    return grad


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, bias, factor, dropout_p, steps):
        scores = (query * factor) @ key.transpose(-2, -1)  # (N, ..., H, L, S), scaled first
        scores = scores + bias  # -inf where forbidden
        weights = steps.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        keep = None
        if dropout_p > 0:  # the reference's F.dropout, with its mask kept: 0 or 1/(1-p)
            keep = torch.nn.functional.dropout(torch.ones_like(weights), dropout_p)
        ctx.save_for_backward(query, key, value, weights, keep)
        ctx.factor, ctx.steps, ctx.bias_shape = factor, steps, bias.shape
        dropped = weights if keep is None else weights * keep  # (N, ..., H, L, S)
        return dropped @ value  # (N, ..., H, L, Ev)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, weights, keep = ctx.saved_tensors
        steps = ctx.steps
        grad_out = steps.read_upstream(grad_out)  # (N, ..., H, L, Ev)
        dropped = weights if keep is None else weights * keep
        grad_value = steps.grad_value(dropped, grad_out)  # (N, ..., H, S, Ev)
        grad_weights = grad_out @ value.transpose(-2, -1)  # (N, ..., H, L, S)
        if keep is not None:
            grad_weights = grad_weights * keep
        grad_scores = steps.grad_scores(weights, grad_weights)  # (N, ..., H, L, S)
        grad_query, grad_key = steps.grad_query_key(grad_scores, query, key, ctx.factor)
        grad_bias = None
        if ctx.needs_input_grad[3]:
            grad_bias = steps.grad_bias(grad_scores, ctx.bias_shape)  # (..., L, S) as the bias
        return (
            reduce_to(grad_query, query.shape),
            reduce_to(grad_key, key.shape),
            reduce_to(grad_value, value.shape),
            grad_bias,
            None,
            None,
            None,
        )


class HandWrittenBackward(ScaledDotProductAttention):
    """The reference SDPA, differentiated by hand instead of by autograd."""

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
        factor = 1 / math.sqrt(E) if scale is None else scale
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        return _Attention.apply(query, key, value, bias, factor, dropout_p, self)

    # -- the backward pass, one overridable step at a time ---------------------------------

    def read_upstream(self, grad_out):
        """dO as the backward reads it: the tensor autograd hands over, in whatever layout."""
        return grad_out  # (N, ..., H, L, Ev)

    def grad_bias(self, grad_scores, shape):
        """dbias = dS, summed over the axes along which the bias was broadcast."""
        return reduce_to(grad_scores, shape)  # (..., L, S) as the bias

    def grad_value(self, weights, grad_out):
        """dV = Pᵀ dO."""
        return weights.transpose(-2, -1) @ grad_out  # (..., S, L) @ (..., L, Ev) -> (..., S, Ev)

    def grad_scores(self, weights, grad_weights):
        """dS = P ⊙ (dP − rowsum(P ⊙ dP)): the softmax Jacobian diag(p) − p pᵀ, row by row."""
        rowsum = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., L, 1)
        return weights * (grad_weights - rowsum)  # (..., L, S)

    def grad_query_key(self, grad_scores, query, key, factor):
        """dQ = scale · dS K and dK = scale · dSᵀ Q."""
        grad_query = grad_scores @ key * factor  # (..., L, S) @ (..., S, E) -> (..., L, E)
        grad_key = grad_scores.transpose(-2, -1) @ query * factor  # (..., S, E)
        return grad_query, grad_key
