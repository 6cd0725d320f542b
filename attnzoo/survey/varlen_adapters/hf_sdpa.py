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
REVIEWS = (
    Review(
        "gradients_match_reference", "float32", "artefact",
        note="the case is 'softcap on logits past exp's range' with its cap taken out (the "
             "adapter declares softcap), so its logits are in the thousands and the softmax is "
             "one-hot: the true dk is about 1e-19, and the tolerance, scaled by the largest "
             "|dk|, is 8e-5. sdpa_attention_forward passes no mask here, so torch runs its CPU "
             "flash kernel; a flash backward forms dS as P(dP − rowsum(dO∘O)) (FlashAttention's "
             "form), two equal dot products whose difference rounds to about 1e-7 of |dO||v|, "
             "then multiplied "
             "by q·scale (|q| near 1000), so dk is off by 4e-4; torch's math backend gives 0 "
             "there. Plain F.scaled_dot_product_attention gives the same gap, the float64 run is "
             "clean, and with the cap in place (hf-eager) the case passes: a float32 flash "
             "backward cannot meet a tolerance scaled by a gradient that is 0 while its "
             "operands are 1e3 (checked on transformers 5.24.0, torch 2.13.0).",
        reproduce="""
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

class Module(torch.nn.Module):
    num_key_value_groups = 1
    is_causal = False

torch.manual_seed(0)
q, k, v = torch.randn(1, 1, 5, 8) * 1000, torch.randn(1, 1, 6, 8), torch.randn(1, 1, 6, 8)
g = torch.randn(1, 5, 1, 8)
dk = {}
for dtype in (torch.float32, torch.float64):
    kk = k.to(dtype).requires_grad_(True)
    out, _ = sdpa_attention_forward(Module(), q.to(dtype), kk, v.to(dtype), None)
    dk[dtype], = torch.autograd.grad(out, kk, g.to(dtype))
# the largest |dk| (float64), then float32's largest error: 2.6e-05 1.5e-04
print(dk[torch.float64].abs().max().item(),
      (dk[torch.float32] - dk[torch.float64]).abs().max().item())
"""),
)


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
