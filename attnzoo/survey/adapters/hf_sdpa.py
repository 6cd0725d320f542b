"""transformers.integrations.sdpa_attention.sdpa_attention_forward.

Converts: SDPA keywords to transformers' (attn_mask → attention_mask, dropout_p → dropout,
scale → scaling); ``enable_gqa`` to the module's ``num_key_value_groups`` = H_q // H_kv, as a
model with grouped heads sets it; the answer from transformers' (N, L, H, Ev) back to
(N, H, L, Ev), a transpose. Masks pass unchanged (a bool mask keeps True = attend, as SDPA).
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="hf-sdpa", title="transformers sdpa_attention_forward",
    distribution="transformers", module="transformers.integrations.sdpa_attention",
    # (batch, heads, seq, head_dim) by contract. is_causal with L != S is not one convention
    # here: sdpa_attention_forward drops is_causal for a single query (its comment: a decoding
    # step attends to every key, the bottom-right reading) and keeps SDPA's top-left for L > 1,
    # so no declared alignment judges both; such calls are set aside, and L == S is judged
    unsupported=frozenset({"rank_other_than_4", "is_causal_rectangular"}),
    refuses=("No available kernel",),
    docs="https://huggingface.co/docs/transformers/attention_interface",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from attnzoo.survey.adapters import _convert, _hf

    module = _hf.Module(query, key, enable_gqa, dropout_p)
    out, _ = sdpa_attention_forward(module, query, key, value, attn_mask, dropout=dropout_p,
                                    scaling=scale, is_causal=is_causal)
    return _convert.heads_first(out)  # (N, L, H, Ev) → (N, H, L, Ev)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
