"""A library that compiles a kernel for each new shape, as a jit does: the first call of a
shape takes DELAY seconds, the next ones none. It is correct: the delay is no finding."""

import runpy
import time
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-compiles", title="a fake library that compiles per shape", distribution="numpy",
    module="torch", unsupported=frozenset({"dropout"}), dtypes=("float64",),
    empty_rows="uniform", empty_rows_docs="https://example.invalid/docs#masking")
DELAY = 0.2
COMPILED = set()


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    shape = (query.shape, key.shape, value.shape, None if attn_mask is None else attn_mask.shape)
    if shape not in COMPILED:
        time.sleep(DELAY)
        COMPILED.add(shape)
    return ATTEND(query, key, value, attn_mask, is_causal, scale, enable_gqa)
