"""A library that aborts on every decoding step (one query), however fresh its process: its
crashes stay with the call, and sending one alone again shows the same death."""

import os
import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-dies-on-one-query", title="a fake library that dies on a single query",
    distribution="numpy", module="torch", unsupported=frozenset({"dropout"}),
    dtypes=("float64",), empty_rows="uniform",
    empty_rows_docs="https://example.invalid/docs#masking")


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if query.shape[-2] == 1:
        os.abort()
    return ATTEND(query, key, value, attn_mask, is_causal, scale, enable_gqa)
