"""An SDPA-style callable whose scores pass through a logit soft-cap, c·tanh(s / c), as some
models' attention does on purpose: plain SDPA has none. At ordinary logits the cap changes the
answer by about what float16 rounding would; at large logits it flattens the softmax."""
import math

import torch

CAP = 30.0


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    L, S = query.shape[-2], key.shape[-2]
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        g = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(g, -3), value.repeat_interleave(g, -3)
    scores = CAP * torch.tanh(query @ key.transpose(-2, -1) * factor / CAP)  # (..., L, S)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, -math.inf)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ value
