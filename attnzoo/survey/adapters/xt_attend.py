"""x-transformers' ``Attend`` (x_transformers.attend), its own softmax path (flash=False).

Converts: ``attn_mask`` to Attend's arguments, broadcast to rank 4 by adding size-1 axes (a
2-D mask means (batch, keys) padding to Attend) — a bool mask to ``mask`` (True = attend, as
SDPA), a float mask to ``attn_bias`` (added to the scores); ``is_causal``, ``scale`` and
``dropout_p`` to Attend's constructor, as x-transformers' Attention builds it (training mode
when p > 0). Grouped heads are Attend's own: it shares key/value heads whenever there are fewer
of them, tiled (query head h reads key/value head h mod H_kv), which it declares
(``gqa=interleaved``) for the harness to adapt.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="xt-attend", title="x-transformers Attend(flash=False)",
    distribution="x-transformers", module="x_transformers.attend",
    # einsum 'b h i d'; key/value heads tiled, repeat('b kvh n d -> b (r kvh) n d'): query
    # head h reads key/value head h mod H_kv, a convention the harness adapts
    unsupported=frozenset({"rank_other_than_4", "gqa=interleaved",
                           "float64=computed-in-float32"}),
    gqa_grouping_docs="https://github.com/lucidrains/x-transformers/blob/main/x_transformers/"
                      "attend.py",
    # create_causal_mask(i, j) = ones(i, j).triu(j - i + 1): the last query sees every key
    causal_alignment="bottom-right",
    docs="https://github.com/lucidrains/x-transformers",
    float64_docs="https://github.com/lucidrains/x-transformers/blob/main/x_transformers/attend.py",
)

# the survey's root causes read against x-transformers' source, its documentation
# (attnzoo.survey.findings)
_ENTIRELY_MASKED = Review(
    "float32", ("no_allowed_key",), "divergence",
    docs="https://github.com/lucidrains/x-transformers/blob/main/x_transformers/attend.py",
    says="Attend zeroes the output of a row that is entirely masked out (\"protect against an "
         "entire row being masked out\").",
    note="Only rows a bool mask empties are zeroed: rows the bottom-right causal mask empties "
         "(L > S) get the mean of the values, and a -inf attn_bias row is NaN (checked on "
         "x-transformers 2.31.10).")
FINDINGS = (
    _ENTIRELY_MASKED, replace(_ENTIRELY_MASKED, dtype="float64"),
)


FLASH = False


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return attend(query, key, value, attn_mask, dropout_p, is_causal, scale, FLASH)


def attend(query, key, value, attn_mask, dropout_p, is_causal, scale, flash):
    import torch
    from x_transformers.attend import Attend

    from attnzoo.survey.adapters import _convert

    module = Attend(causal=is_causal, dropout=dropout_p, scale=scale, flash=flash)
    module.train(dropout_p > 0)
    mask = _convert.rank4(attn_mask)  # a 2-D mask would be read as (batch, keys) padding
    is_bool = mask is not None and mask.dtype == torch.bool
    out, _ = module(query, key, value, mask=mask if is_bool else None,
                    attn_bias=None if is_bool else mask)
    return out  # (N, H, L, Ev): Attend speaks the harness's layout


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
