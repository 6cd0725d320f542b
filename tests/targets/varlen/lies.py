"""Varlen kernels that answer with something other than attention's output: each a verdict."""
import sys

import torch

from reference.varlen import attn_varlen


def wrong_dtype(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    out = attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
    return tuple(t.float() for t in out) if isinstance(out, tuple) else out.float()


def a_string(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    return "\x1b[2Jall good\x1b]0;pwned\x07"


def raises(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    raise ValueError("\x1b[31mno varlen here\x1b[0m")


def exits(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    sys.exit(3)


def no_lse(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
           seqused_k=None, block_table=None, softmax_scale=None, causal=False,
           window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    return torch.zeros(1)


def sdpa_signature(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                   scale=None):
    return query


NOT_CALLABLE = 3
