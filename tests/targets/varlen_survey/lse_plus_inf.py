"""A fake varlen library that gives a row with no key LSE +inf, as flash-attention 2's non-split
path does, while declaring the contract's 0 and -inf: a divergence (V8) the survey must flag."""

import math

from attnzoo.survey.varlen_adapters import Declaration
from reference.varlen import attn_varlen as contract

DOCS = "https://example.invalid/docs#varlen"
DECLARATION = Declaration(
    name="fake-lse-plus-inf", title="a fake library with LSE +inf on empty rows",
    distribution="torch", module="torch", docs=DOCS, converts="nothing",
    causal_alignment_docs=DOCS, empty_rows_docs=DOCS, window_counting_docs=DOCS)


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, return_lse=False, **kw):
    out, lse = contract(q, k, v, cu_seqlens_q, cu_seqlens_k, return_lse=True, **kw)
    lse = lse.masked_fill(lse == -math.inf, math.inf)
    return (out, lse) if return_lse else out
