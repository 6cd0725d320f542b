"""Every argument staged in a fresh row-major buffer, then batch and heads folded with ``.view``.

A kernel that assumes row-major memory is safe once its launcher copies each argument into a
buffer of its own (``torch.empty(shape).copy_(t)``): a transposed view is gathered in order, a
slice at a storage offset lands at the buffer's first element, an expansion with stride 0 is
written out once per item and head, and a mask is staged at the scores' full shape. After that
the batch and head axes fold into one with ``.view`` — which fails or misreads without the copy
(view-on-non-contiguous) — and the scores and the output are one ``bmm`` each. The copy is
differentiable: its backward sums the gradient over the axes it broadcast.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="staged-contiguous",
    title="Each argument copied into a fresh contiguous buffer, heads folded with .view, one bmm",
    technique="query, key, value and the mask copied into new row-major buffers at the full "
    "broadcast shape, batch and head axes folded into one with .view, scores and output as "
    "bmm, in float32 at least",
    why_correct="a copy keeps the values whatever the source's strides, offset or stride-0 "
    "axes, and .view of a fresh row-major buffer folds axes without moving an element",
)


def staged(t, shape, dtype):
    """``t`` broadcast to ``shape`` in a new row-major buffer of ``dtype``."""
    return torch.empty(shape, dtype=dtype, device=t.device).copy_(t)


def _softmax(scores):
    """Softmax over keys; -inf entries get 0 and a row of them stays 0."""
    top = scores.detach().amax(dim=-1, keepdim=True)  # a shift: it carries no gradient
    e = torch.exp(scores - torch.where(torch.isneginf(top), 0.0, top))  # (B, L, S), 0 at -inf
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, 1.0)  # an empty row stays 0


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention on staged copies, (N, ..., H) folded into one axis."""
    L, S, E, Ev = query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]
    work = torch.promote_types(query.dtype, torch.float32)  # half precision computed in float32
    if enable_gqa:  # query head h reads key/value head h // g
        g = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(g, dim=-3), value.repeat_interleave(g, dim=-3)
    lead = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    factor = 1 / math.sqrt(E) if scale is None else scale
    q = staged(query, lead + (L, E), work).view(-1, L, E) * factor  # (B, L, E), B = N·…·H
    k = staged(key, lead + (S, E), work).view(-1, S, E)  # (B, S, E)
    v = staged(value, lead + (S, Ev), work).view(-1, S, Ev)  # (B, S, Ev)
    scores = torch.bmm(q, k.transpose(1, 2))  # (B, L, S)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = staged(attn_mask, lead + (L, S), torch.bool).view(-1, L, S)
        scores = scores.masked_fill(~keep, -math.inf)  # True = may attend
    elif attn_mask is not None:
        scores = scores + staged(attn_mask, lead + (L, S), work).view(-1, L, S)
    if is_causal:  # top-left: query i sees keys 0 .. i
        future = torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1)
        scores = scores.masked_fill(future, -math.inf)
    weights = _softmax(scores)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
    out = torch.bmm(weights, v)  # (B, L, Ev)
    return out.view(lead + (L, Ev)).to(query.dtype)  # (N, ..., H, L, Ev)


SDPA = scaled_dot_product_attention
