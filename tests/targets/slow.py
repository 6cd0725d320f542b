"""A correct attention that takes ATTNZOO_TEST_SECONDS (default 0.2) per call."""
import os
import time

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def attention(Q, K, V, mask=None):
    time.sleep(float(os.environ.get("ATTNZOO_TEST_SECONDS", "0.2")))
    return lesson_numpy.attention(Q, K, V, mask)
