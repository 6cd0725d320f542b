"""A library that refuses grouped-query attention with its own message and declares nothing:
one root cause, the grouped heads, reported as crashes; declared, it is set aside."""

import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-refuses", title="a fake library that refuses GQA", distribution="numpy",
    module="torch", unsupported=frozenset({"dropout"}), dtypes=("float64",),
    empty_rows="uniform", empty_rows_docs="https://example.invalid/docs#masking")
MESSAGE = "grouped-query attention is not supported by this backend"


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        raise NotImplementedError(MESSAGE)
    return ATTEND(query, key, value, attn_mask, is_causal, scale, enable_gqa)
