"""An attention that returns arrays of the right shapes holding text, not numbers."""
import numpy as np

from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def attention(Q, K, V, mask=None):
    out = np.full(Q.shape[:-1] + V.shape[-1:], "x")
    weights = np.full(Q.shape[:-1] + K.shape[-2:-1], "w")
    return out, weights
