"""tests/targets/uniform_rows.py's ``uniform``, declaring its convention beside itself (a
declaration is read from the module that defines the callable)."""

from uniform_rows import uniform as _uniform

ATTNZOO_EMPTY_ROWS = "uniform"


def uniform(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
            enable_gqa=False):
    return _uniform(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
