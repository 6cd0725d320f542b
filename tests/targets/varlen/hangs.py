"""A varlen kernel that never returns a call with a window: check must give a verdict, not hang."""
import time

from reference.varlen import attn_varlen


def attn(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    if tuple(kw.get("window_size", (-1, -1))) != (-1, -1):
        while True:
            time.sleep(0.05)
    return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
