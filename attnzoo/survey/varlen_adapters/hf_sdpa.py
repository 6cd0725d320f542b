"""transformers.integrations.sdpa_attention.sdpa_attention_forward, with the masks
``transformers.masking_utils`` builds for it.

Converts what :mod:`._hf` says: one call per sequence with a cache of ``sk − sq`` tokens and the
mask ``masking_utils`` builds for the "sdpa" implementation (a bool mask, or None where it
relies on SDPA's ``is_causal``, as the library does); the module's ``is_causal`` set to the
call's ``causal``; ALiBi as ``position_bias``, the additive bias sdpa_attention_forward takes
(MPT passes its ALiBi so); the answer from (1, sq, Hq, Dv) to the packed rows.
"""

from attnzoo.survey.varlen_adapters import Declaration, Review, loader

SDPA_SOURCE = ("https://github.com/huggingface/transformers/blob/main/src/transformers/"
               "integrations/sdpa_attention.py")
MASKING = ("https://github.com/huggingface/transformers/blob/main/src/transformers/"
           "masking_utils.py")
CACHE = "https://huggingface.co/docs/transformers/cache_explanation"
API = "https://huggingface.co/docs/transformers/attention_interface"

DECLARATION = Declaration(
    name="hf-sdpa", title="transformers sdpa_attention_forward + masking_utils",
    distribution="transformers", module="transformers.integrations.sdpa_attention", docs=API,
    converts="one call per sequence (batch of one) as a model with a cache of sk − sq tokens "
             "makes it, with the mask masking_utils' sdpa interface builds for it (causal, "
             "sliding window, bidirectional; None where it skips to is_causal); ALiBi as the "
             "position_bias sdpa_attention_forward adds; GQA as num_key_value_groups; the paged "
             "cache gathered by the adapter; guard rows 0.",
    # a query at cache position p sees keys 0..p: the cached tokens and itself, so the last
    # query meets the last key (the cache page's attention matrices; masking_utils' q_offset)
    causal_alignment="bottom-right", causal_alignment_docs=CACHE,
    # sdpa_mask no longer unmasks rows that see no key (allow_torch_fix "has no effect"),
    # retired because torch >= 2.5's SDPA returns 0 there
    empty_rows="zero", empty_rows_docs="https://github.com/huggingface/transformers/pull/47609",
    # sliding_window_overlay: kv_idx > q_idx - sliding_window, sdpa_mask's docstring draws
    # sliding_window=3 as three keys, the current one among them
    window_counting="counts-current-token", window_counting_docs=MASKING,
    # sdpa_attention_forward raises for softcap and returns (output, None), no LSE; masking_utils
    # has no window bounded on the right but the causal mask
    unsupported=("window_right", "softcap", "lse"), unsupported_docs=SDPA_SOURCE,
)


# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)
POSITION_BIAS_EMPTY_ROWS = dict(
    kind="divergence", docs=SDPA_SOURCE,
    says="sdpa_attention_forward returns 0 for a row its boolean mask empties (sdpa_mask relies "
         "on torch >= 2.5's SDPA for it, transformers#47609); with a position_bias, "
         "create_position_bias_mask turns the mask into a float one, "
         "torch.where(attention_mask, position_bias, torch.finfo(dtype).min).",
    note="a finite fill is a score: with ALiBi (a position_bias) a row that sees no key gets "
         "softmax over equal scores, the mean of its sequence's values, and its gradient reaches "
         "them; the same row without a position_bias gives 0. The convention a model gets for "
         "its empty rows so depends on whether it has a position bias. Only the battery's case "
         "of ALiBi on rows that see no key differs; every other case is within the tolerance. "
         "Checked on transformers 5.24.0.",
    reproduce="""
import torch
from types import SimpleNamespace
from transformers.integrations.sdpa_attention import sdpa_attention_forward
torch.manual_seed(0)
q, k, v = torch.randn(1, 1, 2, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)
module = SimpleNamespace(is_causal=False, num_key_value_groups=1, training=False)
mask = torch.ones(1, 1, 2, 3, dtype=torch.bool)
mask[..., 0, :] = False  # query 0 sees no key
out, _ = sdpa_attention_forward(module, q, k, v, mask, dropout=0.0)
print(out[0, 0].abs().max())  # tensor(0.): the row with no key gives 0
bias = torch.zeros(1, 1, 2, 3)  # a position bias (an ALiBi one, here 0)
out, _ = sdpa_attention_forward(module, q, k, v, mask, dropout=0.0, position_bias=bias)
print(torch.allclose(out[0, 0], v[0, 0].mean(0)))  # True: the same row averages the values
""")

REVIEWS = tuple(
    Review(detector, dtype, **POSITION_BIAS_EMPTY_ROWS)
    for detector in ("alibi_is_a_float_bias", "gradients_match_reference", "matches_reference",
                     "rows_without_keys_are_zero")
    for dtype in ("float32", "float64"))


def forward(module, q, k, v, sq, sk, scaling, causal, window_left, softcap, bias):
    """sdpa_attention_forward on one sequence, its mask built as the model builds it."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from attnzoo.survey.varlen_adapters import _hf

    mask = _hf.mask("sdpa", sq, sk, causal, window_left, q.dtype)
    out, _ = sdpa_attention_forward(module, q, k, v, mask, dropout=0.0, scaling=scaling,
                                    position_bias=bias)
    return out


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from attnzoo.survey.varlen_adapters import _hf

    return _hf.attend(forward, DECLARATION.unsupported, q, k, v, cu_seqlens_q, cu_seqlens_k,
                      seqused_k, block_table, softmax_scale, causal, window_size, softcap,
                      alibi_slopes, return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
