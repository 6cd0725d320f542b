"""Dropout from a private generator, seeded per call from torch's random state and replayed in the
backward instead of saving the mask.

Fused kernels never store the L × S dropout mask: each call takes a fresh (seed, offset) from
torch's generator, advancing it, and the backward regenerates the mask from that pair. Here the
pair is one 64-bit seed drawn from torch's default generator, so reseeding torch reproduces it and
every call advances it; a private ``torch.Generator`` seeded with it draws the keep mask, and the
backward seeds a new generator with the saved seed to draw the same mask again. The rescale is a
multiplier that is 0 at p = 1, so nothing divides by zero. Forward and backward are otherwise the
hand-written pair of :mod:`zoo._autograd_attention`.
"""

import math

import torch

from zoo import Decoy
from zoo._autograd_attention import HandWrittenBackward, reduce_to

DECOY = Decoy(
    id="dropout-seed-replayed",
    title="Dropout mask drawn from a per-call seed and regenerated from it in the backward",
    technique="a custom autograd.Function that draws one seed from torch's generator per call, "
    "draws the keep mask from a private generator seeded with it, and saves only the seed: the "
    "backward regenerates the mask",
    why_correct="the seed is a draw from torch's state, so it follows torch's seeding and advances "
    "with every call, and a generator seeded with the same seed draws the same mask twice",
)


class _Replayed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, bias, factor, dropout_p, steps):
        scores = (query * factor) @ key.transpose(-2, -1) + bias  # (N, ..., H, L, S)
        weights = steps.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        seed = steps.draw_seed() if dropout_p > 0 else None
        ctx.save_for_backward(query, key, value, weights)
        ctx.factor, ctx.steps, ctx.bias_shape = factor, steps, bias.shape
        ctx.dropout_p, ctx.seed = dropout_p, seed
        return steps.dropped(weights, dropout_p, seed) @ value  # (N, ..., H, L, Ev)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, weights = ctx.saved_tensors
        steps, p = ctx.steps, ctx.dropout_p
        seed = None if ctx.seed is None else steps.replayed_seed(ctx.seed)
        dropped = steps.dropped(weights, p, seed)  # the forward's mask, drawn again
        grad_value = dropped.transpose(-2, -1) @ grad_out  # (N, ..., H, S, Ev)
        grad_dropped = grad_out @ value.transpose(-2, -1)  # (N, ..., H, L, S)
        grad_weights = steps.dropped(grad_dropped, p, seed)  # the same mask and rescale
        rowsum = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (N, ..., H, L, 1)
        grad_scores = weights * (grad_weights - rowsum)  # (N, ..., H, L, S)
        grad_query = grad_scores @ key * ctx.factor  # (N, ..., H, L, E)
        grad_key = grad_scores.transpose(-2, -1) @ query * ctx.factor  # (N, ..., H, S, E)
        grad_bias = reduce_to(grad_scores, ctx.bias_shape) if ctx.needs_input_grad[3] else None
        return (reduce_to(grad_query, query.shape), reduce_to(grad_key, key.shape),
                reduce_to(grad_value, value.shape), grad_bias, None, None, None)


class SeedReplayed(HandWrittenBackward):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        return _Replayed.apply(query, key, value, bias, factor, dropout_p, self)

    def draw_seed(self):
        """A seed for this call's mask, drawn from (and advancing) torch's default generator."""
        return int(torch.randint(0, 2**62, (), dtype=torch.int64))

    def replayed_seed(self, seed):
        """The seed the backward regenerates the mask from: the forward's."""
        return seed

    def dropped(self, x, p, seed):
        """x with the mask of ``seed`` applied: kept entries times 1/(1 − p), 0 at p = 1."""
        if p == 0:
            return x
        generator = torch.Generator(device=x.device).manual_seed(seed)
        keep = torch.rand(x.shape, generator=generator, device=x.device) >= p  # (..., L, S)
        rescale = 1 / (1 - p) if p < 1 else 0.0  # nothing survives p = 1
        return x * keep.to(x.dtype) * rescale


SDPA = SeedReplayed()
