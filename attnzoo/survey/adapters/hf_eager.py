"""transformers' eager attention: models.llama.modeling_llama.eager_attention_forward.

Converts: a bool mask to the additive mask transformers builds for its eager path (0 where
allowed, ``torch.finfo(dtype).min`` where not — masking_utils' eager mask); ``scale=None`` to
the module's ``scaling`` = head_dim ** -0.5, as every model sets it; ``enable_gqa`` to
``num_key_value_groups`` = H_q // H_kv; ``dropout_p`` to ``dropout`` with the module in training
mode; the answer from (N, L, H, Ev) back to (N, H, L, Ev), a transpose.
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="hf-eager", title="transformers eager_attention_forward (llama)",
    distribution="transformers", module="transformers.models.llama.modeling_llama",
    # causal masks are built by the model (masking_utils), the function takes none
    unsupported=frozenset({"rank_other_than_4", "is_causal", "float64=computed-in-float32"}),
    refuses=("takes no is_causal",),
    docs="https://huggingface.co/docs/transformers/attention_interface",
    # masking_utils fills a masked position with finfo(dtype).min: an empty row is uniform
    empty_rows="uniform",
    empty_rows_docs="https://github.com/huggingface/transformers/blob/main/src/transformers/"
                    "masking_utils.py",
    float64_docs="https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py",
)


# the survey's root causes read against transformers' documentation (attnzoo.survey.findings)
FINDINGS = (
    Review("float32", ("no_allowed_key", "float_mask"), "divergence",
           docs="https://huggingface.co/docs/transformers/main/en/attention_interface",
           says="a float mask is added to the scores and a masked position drops to zero "
                "weight after the softmax.",
           note="eager_attention_forward adds the mask and takes the softmax with no guard, so "
                "a float mask whose row is -inf at every key gives NaN, where the same row as a "
                "bool mask (transformers' own finfo.min fill) gives the mean of the values "
                "(checked on transformers 5.24.0)."),
    Review("float32", ("no_allowed_key", "per_head_mask"), "divergence",
           docs="https://github.com/huggingface/transformers/blob/main/src/transformers/"
                "masking_utils.py",
           says="(in masking_utils' eager mask) a masked position is filled with "
                "torch.finfo(dtype).min and added to the scores.",
           note="A query every key is masked from then outputs the mean of the values whatever "
                "the query is (the fill absorbs q·k in float32), yet autograd returns a nonzero "
                "gradient for that query, the gradient of the unrounded softmax; and its "
                "{0, -inf} float form gives NaN (checked on transformers 5.24.0)."),
    Review("float64", ("no_allowed_key",), "divergence",
           docs="https://huggingface.co/docs/transformers/main/en/attention_interface",
           says="a float mask is added to the scores and a masked position drops to zero "
                "weight after the softmax.",
           note="At float64 the eager softmax runs in float32, where transformers' own "
                "finfo(float64).min fill is -inf, so a query every key is masked from gets NaN "
                "(float32 gives the mean of the values; checked on transformers 5.24.0)."),
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from attnzoo.survey.adapters import _convert, _hf

    module = _hf.Module(query, key, enable_gqa, dropout_p)
    mask = _convert.bool_as_additive(attn_mask, query.dtype, torch.finfo(query.dtype).min)
    scaling = query.shape[-1] ** -0.5 if scale is None else scale
    if is_causal:
        raise NotImplementedError("eager_attention_forward takes no is_causal")
    out, _ = eager_attention_forward(module, query, key, value, mask, scaling=scaling,
                                     dropout=dropout_p)
    return _convert.heads_first(out)  # (N, L, H, Ev) → (N, H, L, Ev)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
