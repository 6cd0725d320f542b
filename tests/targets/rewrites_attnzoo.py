"""A wrong attention (its output doubled) that, while being imported, rewrites the modules of
the project it runs from that the parent imports only later: each would end the parent with
exit 0, as if every detector had held. Run only from a throwaway copy of the project."""
import importlib.util

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

for name in ("reference.lesson_numpy", "reference.sdpa", "reference.lesson_torch",
             "attnzoo.runner", "attnzoo.report", "attnzoo.shrink", "attnzoo.diagnosis.group",
             "detectors.kit.subject"):
    try:
        with open(importlib.util.find_spec(name).origin, "a") as f:
            f.write("\nimport os\nos._exit(0)\n")
    except OSError:
        pass


def attention(Q, K, V, mask=None):
    out, weights = lesson_numpy.attention(Q, K, V, mask)
    return 2 * out, weights
