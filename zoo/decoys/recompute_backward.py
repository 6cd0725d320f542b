"""A backward that recomputes the weights from the saved log-sum-exp, as FlashAttention's does.

A fused kernel cannot keep the L × S weights for the backward pass; it keeps one number per
query row, the log-sum-exp lse = log Σ_j exp(s_ij), and recomputes P = exp(S − lse) tile by
tile when the gradients are asked for. Forward and backward here are written by hand in that
shape: the statistics are formed and kept in float32 (float64 for float64 inputs), whatever
the input precision, and the backward is

    P = exp(S − lse)    dV = Pᵀ dO    dP = dO Vᵀ    D = rowsum(P ⊙ dP)    dS = P ⊙ (dP − D)
    dQ = scale · dS K   dK = scale · dSᵀ Q

A row with no allowed key has lse = −∞ and is shifted by 0 instead, so its P is 0, not NaN.
With dropout the call is left to the saved-weights backward of :mod:`zoo._autograd_attention`.
"""

import math

import torch

from zoo import Decoy
from zoo._autograd_attention import HandWrittenBackward, reduce_to

DECOY = Decoy(
    id="recompute-backward",
    title="Custom autograd.Function that saves the log-sum-exp and recomputes P in the backward",
    technique="forward and backward by hand; only lse = log Σ exp(s) is saved per row (in "
    "float32), and the backward rebuilds P = exp(S − lse) from Q, K and it",
    why_correct="exp(s − log Σ exp(s)) is softmax(s), so the recomputed P is the forward's; "
    "kept in float32, lse carries no more error than the scores themselves",
)


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, bias, factor, steps):
        scores = steps.forward_scores(query, key, bias, factor)  # (..., L, S) in float32+
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)  # (..., L, 1), -inf if empty
        weights = steps.probabilities(scores, lse)  # (..., L, S)
        ctx.save_for_backward(query, key, value, bias, steps.saved_statistics(lse, query))
        ctx.factor, ctx.steps = factor, steps
        return (weights.to(value.dtype) @ value)  # (..., L, Ev)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, bias, lse = ctx.saved_tensors
        steps, factor = ctx.steps, ctx.factor
        scores = steps.recompute_scores(query, key, bias, factor)  # (..., L, S)
        weights = steps.probabilities(scores, lse.to(scores.dtype)).to(value.dtype)
        grad_value = weights.transpose(-2, -1) @ grad_out  # (..., S, Ev)
        grad_weights = grad_out @ value.transpose(-2, -1)  # (..., L, S)
        rowsum = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., L, 1)
        grad_scores = weights * (grad_weights - rowsum)  # (..., L, S)
        grad_query = grad_scores @ key * factor  # (..., L, E)
        grad_key = grad_scores.transpose(-2, -1) @ query * factor  # (..., S, E)
        grad_bias = reduce_to(grad_scores, bias.shape) if ctx.needs_input_grad[3] else None
        return (reduce_to(grad_query, query.shape), reduce_to(grad_key, key.shape),
                reduce_to(grad_value, value.shape), grad_bias, None, None)


class RecomputeBackward(HandWrittenBackward):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        if dropout_p > 0:  # the dropout mask would have to be saved: the saved-weights path
            return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                    enable_gqa)
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        return _Recompute.apply(query, key, value, bias, factor, self)

    # -- the steps ---------------------------------------------------------------------------

    def forward_scores(self, query, key, bias, factor):
        """S = scale · Q Kᵀ + bias in float32 (float64 for float64 inputs), scaled first."""
        work = torch.promote_types(query.dtype, torch.float32)
        q, k = query.to(work), key.to(work)
        return (q * factor) @ k.transpose(-2, -1) + bias.to(work)  # (..., L, S)

    def recompute_scores(self, query, key, bias, factor):
        """The backward's S: the forward's, recomputed from the saved Q and K."""
        return self.forward_scores(query, key, bias, factor)  # (..., L, S)

    def probabilities(self, scores, lse):
        """P = exp(S − lse); a row with lse = −∞ (no allowed key) is shifted by 0: all zeros."""
        shift = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)  # (..., L, 1)
        return torch.exp(scores - shift)  # (..., L, S), exactly 0 at -inf

    def saved_statistics(self, lse, query):
        """What the backward keeps per row: lse in the precision it was formed in."""
        return lse  # (..., L, 1), float32 or float64


SDPA = RecomputeBackward()
