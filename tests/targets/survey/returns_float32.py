"""A library whose type promotion turns 64-bit floats into 32-bit ones, as keras' does on every
backend but TensorFlow: float64 inputs are computed and returned as float32."""

import runpy
from pathlib import Path

from attnzoo.survey.capabilities import Declaration

# the shared math, by path: the worker imports this file alone
ATTEND = runpy.run_path(str(Path(__file__).with_name("_attend.py")))["attend"]

DECLARATION = Declaration(
    name="fake-returns-float32", title="a fake library returning float32 for float64",
    distribution="numpy", module="torch", unsupported=frozenset({"dropout", "autograd"}),
    dtypes=("float64",), empty_rows="uniform",
    empty_rows_docs="https://example.invalid/docs#masking")


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch

    def low(t):
        return t if t is None or t.dtype == torch.bool else t.float()

    return ATTEND(low(query), low(key), low(value), low(attn_mask), is_causal, scale, enable_gqa)
