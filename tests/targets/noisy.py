"""A correct attention that prints on every call: the report must stay readable and clean."""
import sys

from reference import lesson_numpy


def causal_mask(T):
    print("causal_mask", T)
    return lesson_numpy.causal_mask(T)


def softmax(x):
    print("softmax", x.shape, file=sys.stderr)
    return lesson_numpy.softmax(x)


def attention(Q, K, V, mask=None):
    print("attention", Q.shape)
    return lesson_numpy.attention(Q, K, V, mask)


def causal_self_attention(X, W_q, W_k, W_v):
    print("causal_self_attention", X.shape)
    return lesson_numpy.causal_self_attention(X, W_q, W_k, W_v)
