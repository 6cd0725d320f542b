"""An SDPA-style callable that takes its process down with SIGSEGV."""
import os
import signal


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    os.kill(os.getpid(), signal.SIGSEGV)
