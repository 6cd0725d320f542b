"""A correct varlen kernel without a backward, as an inference kernel is: its output never
requires grad, so the gradients detector does not apply and nothing else is flagged."""
import torch

from reference.varlen import attn_varlen


@torch.no_grad()
def attn(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
