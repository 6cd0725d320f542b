"""A correct attention that starts background processes, one of which leaves the session.

At import: a child ``sleep`` in the worker's group, and a double-forked grandchild that calls
setsid(). With ATTNZOO_TEST_HANG=1 attention hangs. Every pid (and the worker's process
group) is appended to the file named by ATTNZOO_TEST_PIDS before the import returns, so a test
can see that none survives the run.
"""
import os
import subprocess
import time

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

PIDS = os.environ.get("ATTNZOO_TEST_PIDS", os.devnull)


def _note(role, pid):
    with open(PIDS, "a") as f:
        f.write(f"{role} {pid} {os.getpgrp()}\n")


_note("worker", os.getpid())
_child = subprocess.Popen(["sleep", "300"])
_note("child", _child.pid)
_ready, _noted = os.pipe()
if os.fork() == 0:  # first fork: leave the worker, start a new session, fork again
    os.setsid()
    if os.fork() == 0:
        _note("daemon", os.getpid())
        os.close(_noted)  # the import goes on only once the daemon's pid is on record
        time.sleep(300)
    os._exit(0)
os.close(_noted)
os.read(_ready, 1)  # returns at end of file: when both forks have closed their copy
os.close(_ready)


def attention(Q, K, V, mask=None):
    if os.environ.get("ATTNZOO_TEST_HANG") == "1":
        _note("hanging", os.getpid())
        while True:
            time.sleep(0.05)
    return lesson_numpy.attention(Q, K, V, mask)
