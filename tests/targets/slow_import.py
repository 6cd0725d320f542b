"""A correct module that takes ATTNZOO_TEST_SECONDS (default 3) to import."""
import os
import time

from reference.lesson_numpy import (  # noqa: F401
    attention,
    causal_mask,
    causal_self_attention,
    softmax,
)

time.sleep(float(os.environ.get("ATTNZOO_TEST_SECONDS", "3")))
