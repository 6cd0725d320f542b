"""A correct attention whose first call in each process takes ATTNZOO_TEST_WARMUP seconds
(default 20): a compile or a cache fill, as real kernels have."""
import os
import time

from reference import lesson_numpy

_cold = [True]


def _warm():
    if _cold[0]:
        time.sleep(float(os.environ.get("ATTNZOO_TEST_WARMUP", "20")))
        _cold[0] = False


def causal_mask(T):
    _warm()
    return lesson_numpy.causal_mask(T)


def softmax(x):
    _warm()
    return lesson_numpy.softmax(x)


def attention(Q, K, V, mask=None):
    _warm()
    return lesson_numpy.attention(Q, K, V, mask)


def causal_self_attention(X, W_q, W_k, W_v):
    _warm()
    return lesson_numpy.causal_self_attention(X, W_q, W_k, W_v)
