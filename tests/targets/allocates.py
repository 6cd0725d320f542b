"""A correct attention that, in every call, first allocates ATTNZOO_TEST_GB GiB (untouched, so
that without a cap the kernel grants it and the call goes on to the right answer)."""
import os

import numpy as np

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

GB = float(os.environ.get("ATTNZOO_TEST_GB", "2"))


def attention(Q, K, V, mask=None):
    hoard = np.empty(int(GB * (1 << 30)), dtype=np.uint8)
    del hoard
    return lesson_numpy.attention(Q, K, V, mask)
