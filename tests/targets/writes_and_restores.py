"""Attention whose every call scales its query in place and scales it back before returning:
the caller's bytes end as they were, and a concurrent reader or a read-only buffer sees the
write. NumPy (lesson) and torch (SDPA) forms."""

import numpy as np
import torch

from reference.lesson_numpy import attention as _attention
from reference.lesson_numpy import causal_mask, causal_self_attention  # noqa: F401
from reference.lesson_numpy import softmax as _softmax


def softmax(x):
    x *= 2.0  # written ...
    x /= 2.0  # ... and put back
    return _softmax(x)


def attention(Q, K, V, mask=None):
    Q *= 2.0
    Q /= 2.0
    return _attention(Q, K, V, mask)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    query.mul_(2.0).div_(2.0)  # an in-place round trip: exact in every float format
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)


_ = np  # the NumPy form's arrays are numpy.ndarray
