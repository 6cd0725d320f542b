"""A varlen kernel that takes its process down with SIGSEGV on a paged cache."""
import os
import signal

from reference.varlen import attn_varlen


def attn(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    if kw.get("block_table") is not None:
        os.kill(os.getpid(), signal.SIGSEGV)
    return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
