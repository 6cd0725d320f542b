"""A correct attention whose answers are instances of an ndarray subclass defined right here."""
import numpy as np

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


class Tagged(np.ndarray):
    """An array that carries a tag: only this module (the worker's import of it) knows it."""


def attention(Q, K, V, mask=None):
    out, weights = lesson_numpy.attention(Q, K, V, mask)
    return out.view(Tagged), weights.view(Tagged)
