"""Modifies its input in place and leaks float64, then patches the comparisons that would see it.

At import it replaces np.array_equal, np.isnan and torch.equal with liars, and every function of
the harness modules it can reach that once decided (or still decides, in the parent) whether an
input changed or which dtype came back. None of that may hide the two faults.
"""
import sys

import numpy as np

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def _always(*args, **kwargs):
    return True


np.array_equal = _always
np.isnan = lambda a, *args, **kwargs: np.zeros(np.shape(a), dtype=bool)
try:
    import torch

    torch.equal = _always
except ImportError:
    pass
for name in ("attnzoo.sandbox.probes", "attnzoo.sandbox.decide", "attnzoo.sandbox.numpy_backend",
             "attnzoo.sandbox.torch_backend"):
    module = sys.modules.get(name)
    for attr in ("_mutated", "_decide", "decide", "_as_answer"):
        if module is not None and hasattr(module, attr):
            setattr(module, attr, lambda *args, **kwargs: None)
    helpers = [getattr(module, c, None) for c in ("Numpy", "Torch")] if module else []
    for cls in filter(None, helpers):  # the old in-worker helpers: same() and dtype_name()
        cls.same = _always
        cls.dtype_name = lambda self, a: "float32"


def attention(Q, K, V, mask=None):
    out, weights = lesson_numpy.attention(Q.astype(np.float64), K.astype(np.float64),
                                          V.astype(np.float64), mask)
    Q *= 2.0  # modifies the caller's array
    return out, weights
