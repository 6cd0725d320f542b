"""Replaces, in its own process, how the worker sends its replies, so that the description of
this module becomes ATTNZOO_TEST_DESCRIPTION (JSON): the parent must read a description that
target.describe could not have made as a bad target, never fail itself."""

import json
import os
import sys

from reference.lesson_numpy import attention, causal_mask, causal_self_attention, softmax  # noqa: F401

wire = sys.modules.get("attnzoo.sandbox.wire")
if wire is not None:
    send = wire.send

    def forged(sock, header, buffers=()):
        if "described" in header:
            header = {"described": json.loads(os.environ["ATTNZOO_TEST_DESCRIPTION"])}
        return send(sock, header, buffers)

    wire.send = forged
