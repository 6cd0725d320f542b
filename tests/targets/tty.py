"""A correct attention that writes to /dev/tty and turns terminal echo off, at import.

The worker has no controlling terminal, so both must fail quietly; run with one, this module
leaves the terminal without echo (which is how the test shows the check is not vacuous).
"""
import os
import termios

from reference.lesson_numpy import (  # noqa: F401
    attention,
    causal_mask,
    causal_self_attention,
    softmax,
)

try:
    fd = os.open("/dev/tty", os.O_RDWR)
except OSError:
    pass
else:
    os.write(fd, b"WRITTEN-TO-TTY\n")
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    os.close(fd)
