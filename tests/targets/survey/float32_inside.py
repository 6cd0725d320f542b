"""A library that computes in float32 whatever it is given, and returns the inputs' dtype: at
float64 it is off by float32's rounding, everywhere and at every size, and by nothing else."""

import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-float32", title="a fake library that computes in float32", distribution="numpy",
    module="torch", unsupported=frozenset({"dropout", "autograd"}), dtypes=("float64",),
    empty_rows="uniform", empty_rows_docs="https://example.invalid/docs#masking")


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch

    def low(t):
        return t if t is None or t.dtype == torch.bool else t.float()

    out = ATTEND(low(query), low(key), low(value), low(attn_mask), is_causal, scale, enable_gqa)
    return out.to(query.dtype)
