"""A library that documents its convention for a query with no allowed key: the mean of the
values (weight 1/S on every key), as a large negative fill gives. Declared, it is no finding."""

import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-uniform", title="a fake library with uniform empty rows", distribution="numpy",
    module="torch", unsupported=frozenset({"dropout"}), dtypes=("float64",),
    empty_rows="uniform", empty_rows_docs="https://example.invalid/docs#masking")


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return ATTEND(query, key, value, attn_mask, is_causal, scale, enable_gqa)

