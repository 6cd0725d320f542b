"""transformers' eager attention of a model with softcapping and a sliding window:
models.gemma2.modeling_gemma2.eager_attention_forward, with the masks
``transformers.masking_utils`` builds for it.

Converts what :mod:`._hf` says: one call per sequence with a cache of ``sk − sq`` tokens and the
mask ``masking_utils`` builds for the "eager" implementation (0 where a key is seen,
``torch.finfo(dtype).min`` where not); ``softcap`` to the function's ``softcap`` (None for 0);
ALiBi added to that float mask, the additive bias eager attention takes (the cap comes first,
then the mask, as the contract orders them); the answer from (1, sq, Hq, Dv) to the packed
rows. Its softmax runs in float32 whatever the input (``dtype=torch.float32``, "upcast
attention to fp32"), so it is surveyed at float32.
"""

from attnzoo.survey.varlen_adapters import Declaration, loader
from attnzoo.survey.varlen_adapters.hf_sdpa import API, CACHE, MASKING

GEMMA2 = ("https://github.com/huggingface/transformers/blob/main/src/transformers/models/"
          "gemma2/modeling_gemma2.py")

DECLARATION = Declaration(
    name="hf-eager", title="transformers eager_attention_forward (gemma2) + masking_utils",
    distribution="transformers", module="transformers.models.gemma2.modeling_gemma2", docs=API,
    converts="one call per sequence (batch of one) as a model with a cache of sk − sq tokens "
             "makes it, with the float mask masking_utils' eager interface builds for it "
             "(causal, sliding window, bidirectional); softcap to its softcap; ALiBi added to "
             "that mask; GQA as num_key_value_groups; the paged cache gathered by the adapter; "
             "guard rows 0.",
    causal_alignment="bottom-right", causal_alignment_docs=CACHE,
    # eager_mask fills a masked key with finfo(dtype).min, not -inf: a row that sees no key
    # gets the same score at every key of its call (the fill absorbs the scores, the cap and
    # an ALiBi bias) and weighs them all equally, the mean of its sequence's values
    empty_rows="uniform", empty_rows_docs=MASKING,
    window_counting="counts-current-token", window_counting_docs=MASKING,
    dtypes=("float32",), dtypes_docs=GEMMA2,
    # eager_attention_forward returns (output, attention weights), no LSE; masking_utils has no
    # window bounded on the right but the causal mask
    unsupported=("window_right", "lse"), unsupported_docs=GEMMA2,
)


REVIEWS = ()  # nothing flagged (docs/survey-varlen.md)


def forward(module, q, k, v, sq, sk, scaling, causal, window_left, softcap, bias):
    """eager_attention_forward on one sequence, its mask built as the model builds it."""
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    from attnzoo.survey.varlen_adapters import _hf

    mask = _hf.mask("eager", sq, sk, causal, window_left, q.dtype)
    if bias is not None:
        mask = bias if mask is None else mask + bias
    out, _ = eager_attention_forward(module, q, k, v, mask, dropout=0.0, scaling=scaling,
                                     softcap=softcap if softcap > 0 else None)
    return out


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from attnzoo.survey.varlen_adapters import _hf

    return _hf.attend(forward, DECLARATION.unsupported, q, k, v, cu_seqlens_q, cu_seqlens_k,
                      seqused_k, block_table, softmax_scale, causal, window_size, softcap,
                      alibi_slopes, return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
