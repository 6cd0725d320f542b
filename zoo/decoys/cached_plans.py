"""What may be cached between calls, cached: masks by shape, a scores workspace never handed out.

Between two calls of the same shapes a kernel launcher has work it need not redo, and this
callable keeps it: the causal mask for each (L, S, device), the head map of grouped-query
attention for each (H_q, H_kv, device), and on the inference path a scores buffer for each
shape, dtype and device that ``torch.matmul(..., out=)`` overwrites whole. All three are keyed
by what they are a function of — shapes, dtypes, devices — and never by which tensors were
passed or what they held, and the buffer never leaves the call: the weights and the output are
new tensors. Refilling the inputs in place, passing new ones, or writing into an answer
changes nothing that is kept.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="cached-plans",
    title="Causal masks, head maps and a scores workspace cached by shape between calls",
    technique="per-shape caches of the causal mask and the grouped-query head map, and a "
    "scores buffer per shape written with matmul(out=) on the inference path",
    why_correct="each cached thing is a function of the shapes, dtype and device it is keyed "
    "by, the workspace is overwritten whole before it is read, and no answer shares its memory",
)


class CachedPlans:
    """F.scaled_dot_product_attention's signature, with its shape-only work cached."""

    def __init__(self):
        self.masks, self.heads, self.buffers = {}, {}, {}

    def causal(self, L, S, device):
        """(L, S) bool, True where query i may see key j <= i (top-left), built once a shape."""
        key = (L, S, str(device))
        if key not in self.masks:
            self.masks[key] = torch.ones(L, S, dtype=torch.bool, device=device).tril()
        return self.masks[key]

    def head_map(self, h_q, h_kv, device):
        """Query head h reads key/value head h // (h_q / h_kv), built once a pair of counts."""
        key = (h_q, h_kv, str(device))
        if key not in self.heads:
            self.heads[key] = torch.arange(h_q, device=device) // (h_q // h_kv)
        return self.heads[key]

    def scores(self, q, k):
        """q @ kᵀ, into a buffer kept per shape when no gradient is wanted."""
        if q.requires_grad or k.requires_grad:
            return q @ k.transpose(-2, -1)
        shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
        key = (tuple(shape), q.dtype, str(q.device))
        if key not in self.buffers:
            self.buffers[key] = torch.empty(shape, dtype=q.dtype, device=q.device)
        return torch.matmul(q, k.transpose(-2, -1), out=self.buffers[key])  # overwritten whole

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            heads = self.head_map(query.shape[-3], key.shape[-3], query.device)
            key, value = key.index_select(-3, heads), value.index_select(-3, heads)
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        s = self.scores(query * factor, key)  # (N, ..., H, L, S), perhaps the workspace
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            s = s + attn_mask  # a float mask is added (a new tensor: the buffer stays inside)
        allowed = self.causal(L, S, query.device) if is_causal else None
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            allowed = attn_mask if allowed is None else allowed & attn_mask
        if allowed is not None:
            s = torch.where(allowed, s, -math.inf)
        top = s.amax(dim=-1, keepdim=True).detach()
        e = torch.exp(s - torch.where(torch.isneginf(top), 0.0, top))  # 0 where forbidden
        total = e.sum(dim=-1, keepdim=True)
        weights = e / torch.where(total > 0, total, 1.0)  # an empty row stays 0
        if dropout_p > 0:
            weights = torch.nn.functional.dropout(weights, dropout_p)
        return weights @ value  # (N, ..., H, L, Ev): new memory, the caller's


SDPA = CachedPlans()
