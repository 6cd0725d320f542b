"""A kernel that implements the contract without a paged cache, ALiBi or the LSE, and refuses
each loudly: what a library whose API cannot spell them looks like to the harness."""

from reference.varlen import attn_varlen as _reference


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    for given, what in ((block_table, "a paged cache"), (alibi_slopes, "ALiBi"),
                        (return_lse or None, "the LSE")):
        if given is not None:
            raise NotImplementedError(f"{what} is not supported")
    return _reference(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                      max_seqlen_k=max_seqlen_k, seqused_k=seqused_k,
                      softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                      softcap=softcap)
