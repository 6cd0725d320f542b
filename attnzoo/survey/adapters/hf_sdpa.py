"""transformers.integrations.sdpa_attention.sdpa_attention_forward.

Converts: SDPA keywords to transformers' (attn_mask → attention_mask, dropout_p → dropout,
scale → scaling); ``enable_gqa`` to the module's ``num_key_value_groups`` = H_q // H_kv, as a
model with grouped heads sets it; the answer from transformers' (N, L, H, Ev) back to
(N, H, L, Ev), a transpose. Masks pass unchanged (a bool mask keeps True = attend, as SDPA).
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="hf-sdpa", title="transformers sdpa_attention_forward",
    distribution="transformers", module="transformers.integrations.sdpa_attention",
    unsupported=frozenset({"rank_other_than_4"}),  # (batch, heads, seq, head_dim) by contract
    refuses=("No available kernel",),
    docs="https://huggingface.co/docs/transformers/attention_interface",
)


# the survey's root causes read against transformers' documentation (attnzoo.survey.findings)
_DECODE = Review(
    "float32", ("is_causal_rectangular", "single_query"), "convention",
    docs="https://github.com/huggingface/transformers/blob/main/src/transformers/integrations/"
         "sdpa_attention.py",
    says="(in sdpa_attention_forward's comments) a single query is a decoding step that gets "
         "full attention over every key, so is_causal is dropped when L = 1.",
    note="That is the bottom-right reading at L = 1, while L > 1 keeps SDPA's top-left "
         "(checked on transformers 5.24.0).",
)
FINDINGS = (_DECODE, replace(_DECODE, dtype="float64"))


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from attnzoo.survey.adapters import _convert, _hf

    module = _hf.Module(query, key, enable_gqa, dropout_p)
    out, _ = sdpa_attention_forward(module, query, key, value, attn_mask, dropout=dropout_p,
                                    scaling=scale, is_causal=is_causal)
    return _convert.heads_first(out)  # (N, L, H, Ev) → (N, H, L, Ev)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
