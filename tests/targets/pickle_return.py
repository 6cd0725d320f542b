"""Wrong answers (no scaling) smuggled in objects whose pickle would run code on unpickling.

softmax returns an object that is no array at all; attention returns an ndarray subclass whose
``__reduce__`` and attributes carry the payload. Nothing may unpickle them: the marker file
stays absent and the wrong answers are flagged.
"""
import os

import numpy as np

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention  # noqa: F401

CODE = f"open({os.environ.get('ATTNZOO_TEST_MARKER', '/dev/null')!r}, 'w').write('ran')"


class Payload:
    def __reduce__(self):
        return (exec, (CODE,))


class Smuggler(np.ndarray):
    def __reduce__(self):
        return (exec, (CODE,))


def softmax(x):
    return Payload()


def attention(Q, K, V, mask=None):
    out, weights = lesson_numpy.attention(Q * np.sqrt(Q.shape[-1]), K, V, mask)  # no 1/sqrt(d)
    out, weights = out.view(Smuggler), weights.view(Smuggler)
    out.payload = Payload()
    return out, weights
