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

from attnzoo.survey.varlen_adapters import Declaration, Review, loader
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
    # gets the same score at every key of its call and weighs them all equally (the SDPA
    # contract's "uniform"). The varlen conventions have no such word; the nearest is
    # "unmasked" (transformers' former _unmask_unattended: such a row attends every key), and
    # the probe names the difference
    empty_rows="unmasked", empty_rows_docs=MASKING,
    window_counting="counts-current-token", window_counting_docs=MASKING,
    dtypes=("float32",), dtypes_docs=GEMMA2,
    # eager_attention_forward returns (output, attention weights), no LSE; masking_utils has no
    # window bounded on the right but the causal mask
    unsupported=("window_right", "lse"), unsupported_docs=GEMMA2,
)


# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)
REVIEWS = (
    Review(
        "empty_row_convention", "float32", "convention", docs=MASKING,
        says="eager_mask builds a float mask with 0 where a key takes part and the minimum "
             "value of the dtype (torch.finfo(dtype).min) where it does not, added to the "
             "scores.",
        note="in float32 that fill absorbs every score, so a query that every key is masked "
             "from weighs all the keys of its call equally and outputs the plain mean of the "
             "values, whatever the query is: the SDPA contract's 'uniform' convention, which "
             "the SDPA survey's hf-eager row declares. The varlen conventions have no such "
             "word ('unmasked' takes the softmax of the real scores), so the probe names it "
             "as none of them. In a left-padded batch the mean takes in the padding (checked "
             "on transformers 5.24.0).",
        reproduce="""
import torch
from transformers.masking_utils import eager_mask
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

class Module(torch.nn.Module):
    num_key_value_groups = 1

q, k = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4)
v = torch.tensor([[[[1.0], [3.0]]]])
mask = eager_mask(1, 2, 2, attention_mask=torch.tensor([[False, True]]))  # key 0 is padding
out, weights = eager_attention_forward(Module().eval(), q, k, v, mask, scaling=0.5)
print(weights[0, 0, 0], out[0, 0, 0])  # query 0 sees no key: tensor([0.5, 0.5]) tensor([2.])
"""),
)


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
