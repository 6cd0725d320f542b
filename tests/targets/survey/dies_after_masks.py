"""A library whose masked calls leave its process broken: once a masked call has run, the next
unmasked call aborts (a compiled kernel that wrote past its buffer, found later). Every call is
right when sent alone to a fresh process, so the crashes are charged to the calls before them,
and the finding stays a crash."""

import os
import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-dies-after-masks", title="a fake library that dies after masked calls",
    distribution="numpy", module="torch", unsupported=frozenset({"dropout"}),
    dtypes=("float64",), empty_rows="uniform",
    empty_rows_docs="https://example.invalid/docs#masking")

_damaged = []  # set by a masked call: the state the next unmasked call trips over


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if attn_mask is not None or is_causal:
        _damaged.append(True)
    elif _damaged:
        os.abort()
    return ATTEND(query, key, value, attn_mask, is_causal, scale, enable_gqa)
