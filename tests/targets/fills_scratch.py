"""A correct attention that, in every call, writes ATTNZOO_TEST_MB MiB into a file of its
scratch directory (TMPDIR) before answering."""
import os

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

MB = int(os.environ.get("ATTNZOO_TEST_MB", "2"))


def attention(Q, K, V, mask=None):
    with open(os.path.join(os.environ["TMPDIR"], "filler"), "wb") as f:
        for _ in range(MB):
            f.write(b"\0" * (1 << 20))
    return lesson_numpy.attention(Q, K, V, mask)
