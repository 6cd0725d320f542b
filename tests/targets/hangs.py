"""An attention that never returns: check must turn it into a verdict, not hang."""
import time

from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def attention(Q, K, V, mask=None):
    while True:
        time.sleep(0.05)
