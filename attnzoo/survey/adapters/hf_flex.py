"""transformers.integrations.flex_attention.flex_attention_forward (torch flex_attention, compiled).

Converts: the mask to the 4-D (N, H_m, L, S) form transformers' mask builders give (the
function indexes ``score_mask[b][0][q][kv]``, so a mask broadcast over batch, queries or keys
is expanded, a view); a bool mask to an additive score mask, 0 where allowed and -inf where not
(flex's ``score_mask`` path; transformers builds a BlockMask only inside its models); ``scale``
to ``scaling``; the answer from (N, L, H, Ev) back to (N, H, L, Ev), a transpose. Group sharing
is the function's own (it passes enable_gqa to flex_attention). The first call of each shape
compiles, so calls get a long time limit. ``hf-flex-eager`` is the same function run uncompiled.
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="hf-flex", title="transformers flex_attention_forward",
    distribution="transformers", module="transformers.integrations.flex_attention",
    # causal masks come as a BlockMask built by the model; dropout raises ValueError; a 4-D
    # mask is (batch, 1, q, kv), one for every head: score_mask[b][0][q][kv], as
    # https://huggingface.co/docs/transformers/main/en/attention_interface documents
    unsupported=frozenset({"rank_other_than_4", "is_causal", "dropout", "autograd", "float64",
                           "per_head_mask"}),
    refuses=("takes no is_causal", "does not support `dropout`"),
    dtypes=("float32",),  # flex_attention on CPU takes float32, float16, bfloat16 only
    call_seconds=120.0,
    docs="https://huggingface.co/docs/transformers/attention_interface",
)


# the survey's root causes read against the documentation (attnzoo.survey.findings)

FINDINGS = (
    Review("float32", ("any_mask",), "divergence",
           docs="https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html",
           says="a score_mod may read captured tensors at (b, h, q_idx, kv_idx), and "
                "torch.compile(flex_attention) is the fused kernel of the same computation.",
           note="Compiled on CPU, transformers' score_mask[b][0][q][kv] reads out of bounds "
                "(SIGABRT, or NaN rows), while the uncompiled call is finite (checked on torch "
                "2.13.0, transformers 5.24.0).",
           issue="https://github.com/pytorch/pytorch/issues/172225"),
    Review("float32", ("after_earlier_calls",), "divergence",
           docs="https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html",
           says="torch.compile(flex_attention) is the fused kernel of the same computation.",
           note="The masked calls of the root cause above corrupt the process's heap (run alone, "
                "one aborts with glibc's 'munmap_chunk(): invalid pointer'); a later call, "
                "masked or not, can die of it. Each of these calls is right when sent alone to "
                "a fresh process (checked on torch 2.13.0, transformers 5.24.0).",
           issue="https://github.com/pytorch/pytorch/issues/172225"),
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return forward(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def forward(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """The conversions above around one call of transformers' flex_attention_forward."""
    import math

    from transformers.integrations.flex_attention import flex_attention_forward

    from attnzoo.survey.adapters import _convert, _hf

    if is_causal:
        raise NotImplementedError("flex_attention_forward takes no is_causal (a BlockMask does)")
    module = _hf.Module(query, key, enable_gqa, dropout_p)
    mask = _convert.full_mask(attn_mask, query, key)  # (N, H_m, L, S)
    mask = _convert.bool_as_additive(mask, query.dtype, -math.inf)
    out, _ = flex_attention_forward(module, query, key, value, mask, scaling=scale,
                                    dropout=dropout_p)
    return _convert.heads_first(out)  # (N, L, H, Ev) → (N, H, L, Ev)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
