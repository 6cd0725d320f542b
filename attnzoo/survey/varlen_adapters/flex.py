"""torch.nn.attention.flex_attention.flex_attention, uncompiled (eager).

Converts what :mod:`._flex` says: the packed tensors to (1, H, total, D) and back; sequences,
causal and window as a ``mask_mod``, softcap and ALiBi as a ``score_mod``, in the forms the
FlexAttention blog writes them; a paged cache gathered into packed keys by the adapter; the
LSE's leading batch axis dropped. Group sharing and the LSE are flex's own.
"""

from attnzoo.survey.varlen_adapters import Declaration, loader

BLOG = "https://pytorch.org/blog/flexattention/"
API = "https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html"

DECLARATION = Declaration(
    name="flex", title="torch flex_attention (eager)", distribution="torch",
    module="torch.nn.attention.flex_attention", docs=API,
    converts="packed (total, H, D) to (1, H, total, D) and back; sequences, bottom-right "
             "causal and the window as a mask_mod, softcap then ALiBi as a score_mod (flex has "
             "none of these of its own: the blog writes each so); the paged cache is gathered "
             "by the adapter, so page placement tests the adapter, not the library; the LSE's "
             "batch axis dropped, its values flex's own.",
    # flex has no causal flag: the mask_mod states the diagonal, here the contract's
    causal_alignment="bottom-right", causal_alignment_docs=BLOG,
    # fully masked rows are handled unless ROWS_GUARANTEED_SAFE promises there are none
    empty_rows="zero", empty_rows_docs=API + "#torch.nn.attention.flex_attention.FlexKernelOptions",
    # the blog's sliding window q_idx - kv_idx <= SLIDING_WINDOW keeps both ends
    window_counting="inclusive", window_counting_docs=BLOG,
)


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from torch.nn.attention.flex_attention import flex_attention

    from attnzoo.survey.varlen_adapters import _flex

    return _flex.attend(flex_attention, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                        block_table, softmax_scale, causal, window_size, softcap, alibi_slopes,
                        return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
