"""A lesson module whose causal_mask takes its process down; everything else is the reference."""
import os

from reference.lesson_numpy import attention, causal_self_attention, softmax  # noqa: F401


def causal_mask(T):
    os._exit(9)
