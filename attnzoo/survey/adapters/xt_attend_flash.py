"""x-transformers' ``Attend(flash=True)``: its path through F.scaled_dot_product_attention.

Converts what :mod:`attnzoo.survey.adapters.xt_attend` converts; only ``flash`` differs.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.adapters.xt_attend import attend
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="xt-attend-flash", title="x-transformers Attend(flash=True)",
    distribution="x-transformers", module="x_transformers.attend",
    unsupported=frozenset({"rank_other_than_4", "gqa=interleaved"}),  # as xt-attend
    gqa_grouping_docs="https://github.com/lucidrains/x-transformers/blob/main/x_transformers/"
                      "attend.py",
    # create_causal_mask(i, j) = ones(i, j).triu(j - i + 1): the last query sees every key
    causal_alignment="bottom-right",
    refuses=("No available kernel",),
    docs="https://github.com/lucidrains/x-transformers",
)


# the survey's root causes read against x-transformers' source, its documentation
# (attnzoo.survey.findings)
_TOP_LEFT_WHEN_TALL = Review(
    "float32", ("no_allowed_key", "is_causal_rectangular"), "divergence",
    docs="https://github.com/lucidrains/x-transformers/blob/main/x_transformers/attend.py",
    says="the causal mask is create_causal_mask(i, j) = ones(i, j).triu(j - i + 1), aligned "
         "bottom-right, which the flash=False path applies at every shape.",
    note="flash=True builds that mask only when S > L; with L > S it hands is_causal to SDPA, "
         "which aligns top-left, so a query that should see no key sees key 0 (checked on "
         "x-transformers 2.31.10).")
FINDINGS = (_TOP_LEFT_WHEN_TALL, replace(_TOP_LEFT_WHEN_TALL, dtype="float64"))


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return attend(query, key, value, attn_mask, dropout_p, is_causal, scale, flash=True)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
