"""A hand-written backward whose weights wait in a workspace on the module, one slot per forward.

Kernels that manage their own memory keep intermediate buffers in a pool the module owns rather
than in tensors saved on the graph. That is correct as long as each forward's graph remembers
which slot is its own: here the forward stores its weights in a fresh slot and saves only the
slot's number on ``ctx``; the backward reads that slot (as often as autograd asks, as
gradcheck does), and the slot is freed with the graph. Any number of calls may come between a
forward and its backward.
"""

import math
import weakref

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Decoy
from zoo._autograd_attention import reduce_to

DECOY = Decoy(
    id="workspace-slot-per-forward",
    title="Weights kept in a module-owned workspace, one slot per forward, its number on ctx",
    technique="the forward stores P in a new slot of a dict on the module and saves the slot's "
              "number on ctx; the backward reads that slot; the slot is freed with the graph",
    why_correct="each backward reads the slot its own forward filled, whatever other forwards "
                "stored meanwhile",
)


class _Slotted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, bias, factor, module):
        scores = (query * factor) @ key.transpose(-2, -1) + bias  # (..., L, S)
        weights = module.softmax(scores)  # (..., L, S), empty rows are 0
        ctx.slot, ctx.module = module.stash(weights), module
        weakref.finalize(ctx, module.release, ctx.slot)  # freed with the graph
        ctx.save_for_backward(query, key, value)
        ctx.factor, ctx.bias_shape = factor, bias.shape
        return weights @ value  # (..., L, Ev)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value = ctx.saved_tensors
        weights = ctx.module.workspace[ctx.slot]  # (..., L, S): this forward's own
        grad_weights = grad_out @ value.transpose(-2, -1)  # (..., L, S)
        rowsum = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., L, 1)
        grad_scores = weights * (grad_weights - rowsum)  # (..., L, S)
        grads = (grad_scores @ key * ctx.factor,  # (..., L, E)
                 grad_scores.transpose(-2, -1) @ query * ctx.factor,  # (..., S, E)
                 weights.transpose(-2, -1) @ grad_out)  # (..., S, Ev)
        grad_bias = reduce_to(grad_scores, ctx.bias_shape) if ctx.needs_input_grad[3] else None
        return tuple(reduce_to(g, x.shape) for g, x in zip(grads, (query, key, value))) + (
            grad_bias, None, None)


class WorkspaceSlots(ScaledDotProductAttention):
    def __init__(self):
        self.workspace, self.slots = {}, 0

    def stash(self, weights):
        """A new slot holding ``weights``: its number."""
        self.slots += 1
        self.workspace[self.slots] = weights
        return self.slots

    def release(self, slot):
        self.workspace.pop(slot, None)

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        if dropout_p > 0:  # the dropout mask would need a slot too: the reference's autograd
            return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                    enable_gqa)
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        bias = self.bias(attn_mask, is_causal, L, S, query)  # (..., L, S), -inf where forbidden
        return _Slotted.apply(query, key, value, bias, factor, self)


SDPA = WorkspaceSlots()
