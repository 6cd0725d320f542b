"""Writes a pickle payload into the worker's socket: unpickled, it would create a marker file.

Where: at import with ATTNZOO_TEST_WHEN=import (a bad target), else on the first attention call.
A parent that unpickled what the worker sends would run the payload in attnzoo itself.
"""
import os
import pickle
import struct
import sys

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


class Payload:
    def __reduce__(self):
        code = f"open({os.environ.get('ATTNZOO_TEST_MARKER', '/dev/null')!r}, 'w').write('ran')"
        return (exec, (code,))


def _inject():
    fd = int(sys.argv[1])  # the worker's socket, as the worker was started
    data = pickle.dumps(("ok", Payload()))
    os.write(fd, struct.pack("!i", len(data)) + data)  # a multiprocessing.connection frame


if os.environ.get("ATTNZOO_TEST_WHEN") == "import":
    _inject()


def attention(Q, K, V, mask=None):
    _inject()
    return lesson_numpy.attention(Q, K, V, mask)
