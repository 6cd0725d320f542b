"""A kernel that declares, beside itself, what a command line would: HF's window counting, and
no LSE. ``lying_*`` declare words the varlen contract does not have, and
``raising_declaration`` one that raises when read."""

from zoo.varlen.decoys.sliding_window_counts_current_token import VARLEN as _counts_current

ATTNZOO_WINDOW_COUNTING = "counts-current-token"
ATTNZOO_UNSUPPORTED = ("lse",)


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    if return_lse:
        raise NotImplementedError("the LSE is not returned")
    return _counts_current(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                           max_seqlen_k=max_seqlen_k, seqused_k=seqused_k,
                           block_table=block_table, softmax_scale=softmax_scale, causal=causal,
                           window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)


def lying_counting(*args, **kwargs):
    return attn_varlen(*args, **kwargs)


lying_counting.ATTNZOO_WINDOW_COUNTING = "half-open"


def lying_words(*args, **kwargs):
    return attn_varlen(*args, **kwargs)


lying_words.ATTNZOO_UNSUPPORTED = ("pages",)


class _Raises:
    def __iter__(self):
        raise RuntimeError("read me and fail")


def raising_declaration(*args, **kwargs):
    return attn_varlen(*args, **kwargs)


raising_declaration.ATTNZOO_UNSUPPORTED = _Raises()
