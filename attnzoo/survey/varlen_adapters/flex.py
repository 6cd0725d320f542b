"""torch.nn.attention.flex_attention.flex_attention, uncompiled (eager).

Converts what :mod:`._flex` says: the packed tensors to (1, H, total, D) and back; sequences,
causal and window as a ``mask_mod``, softcap and ALiBi as a ``score_mod``, in the forms the
FlexAttention blog writes them; a paged cache gathered into packed keys by the adapter; the
LSE's leading batch axis dropped. Group sharing and the LSE are flex's own.
"""

from attnzoo.survey.varlen_adapters import Declaration, Review, loader

BLOG = "https://pytorch.org/blog/flexattention/"
API = "https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html"
SOURCE = "https://github.com/pytorch/pytorch/blob/main/torch/nn/attention/flex_attention.py"

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
    # flex_attention's input validation (_validate_device) raises NotImplementedError
    # "FlexAttention does not support backward on CPU" for CPU inputs that require grad
    unsupported=("autograd",), unsupported_docs=SOURCE,
)

# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)

NO_KEYS = dict(
    kind="divergence", docs=API,
    says="key is (B, Hkv, S, E) and the output (B, Hq, L, Ev); a row that every key is masked "
         "from gives 0 (fully masked rows are 0, not NaN, since "
         "https://github.com/pytorch/pytorch/pull/131552).",
    note="with no key at all (S = 0: here sequence 3, with no query and no key, passed "
         "alone) flex_attention raises IndexError from a max over the empty key axis, with "
         "queries (L > 0) or without; L = 0 with S > 0 returns the empty output (checked on "
         "torch 2.13.0).",
    reproduce="""
import torch
from torch.nn.attention.flex_attention import flex_attention
q = torch.randn(1, 2, 3, 8)
k = v = torch.randn(1, 2, 0, 8)  # no key
flex_attention(q, k, v)  # IndexError: max(): Expected reduction dim 3 to have non-zero size.
""")

MASKED_VALUES_READ = dict(
    kind="divergence", docs=BLOG,
    says="a mask_mod returns False where a query may not attend to a key: the score is masked "
         "out before the softmax, so that key takes no part in the output.",
    note="a NaN in the value of a key the mask_mod masks from every query reaches the output: "
         "the masked key gets weight 0, and 0 · NaN is NaN. The keys are in flex's buffer "
         "because the varlen caller's packed buffer holds them (keys allocated past seqused_k, "
         "a tail past the last sequence); flash-attention's varlen kernels never read them. A "
         "NaN in a masked key (not value) changes nothing (checked on torch 2.13.0, eager and "
         "compiled). SDPA had the same with a boolean mask: "
         "https://github.com/pytorch/pytorch/issues/101967 (closed).",
    reproduce="""
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
q, k, v = torch.randn(1, 1, 3, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
v[0, 0, 3] = float("nan")  # key 3: masked for every query below
mask = create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx < 3, 1, None, 3, 4, device="cpu")
print(flex_attention(q, k, v, block_mask=mask).isnan().any())  # tensor(True)
""")

REVIEWS = tuple(
    Review(detector, dtype, **review)
    for dtype in ("float32", "float64")
    for detector, review in (("per_sequence_equivalence", NO_KEYS),
                             ("padding_is_never_read", MASKED_VALUES_READ)))


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from torch.nn.attention.flex_attention import flex_attention

    from attnzoo.survey.varlen_adapters import _flex

    return _flex.attend(flex_attention, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                        block_table, softmax_scale, causal, window_size, softcap, alibi_slopes,
                        return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
