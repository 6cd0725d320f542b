"""An attention that calls sys.exit and, for causal self-attention, kills its own process."""
import os
import sys

from reference.lesson_numpy import causal_mask, softmax  # noqa: F401


def attention(Q, K, V, mask=None):
    sys.exit(3)


def causal_self_attention(X, W_q, W_k, W_v):
    os._exit(7)
