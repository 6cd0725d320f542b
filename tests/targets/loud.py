"""A correct attention that prints ATTNZOO_TEST_MB megabytes (default 64) on its first call."""
import os
import sys

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

_quiet = [False]


def attention(Q, K, V, mask=None):
    if not _quiet[0]:
        _quiet[0] = True
        line = b"x" * 1023 + b"\n"
        for _ in range(int(float(os.environ.get("ATTNZOO_TEST_MB", "64")) * 1024)):
            sys.stdout.buffer.write(line)
        sys.stdout.flush()
    return lesson_numpy.attention(Q, K, V, mask)
