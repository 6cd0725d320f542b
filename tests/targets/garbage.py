"""An attention that returns the wrong things: a string, a list, one array instead of two."""
import numpy as np


def causal_mask(T):
    return [[j <= i for j in range(T)] for i in range(T)]


def softmax(x):
    return "softmax"


def attention(Q, K, V, mask=None):
    return np.zeros(3)


def causal_self_attention(X, W_q, W_k, W_v):
    return None
