"""A child process's tie to attnzoo: it dies when attnzoo dies, and cannot ptrace it.

Both the worker server (:mod:`attnzoo.sandbox.zygote`) and each worker
(:mod:`attnzoo.sandbox.worker`) call :func:`die_with_parent` first thing, before their slow
imports. It lives apart from :mod:`attnzoo.sandbox.hygiene`, the parent's side of the workers'
lives, so that neither child imports the parent's side.
"""

import ctypes
import signal

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def die_with_parent():
    """SIGKILL when the parent dies, even by SIGKILL (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def dumpable(flag):
    """Whether a process of the same user may ptrace this one or read its memory (Linux only):
    attnzoo and its worker server are not, so that no worker can."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def subreaper():
    """Orphaned descendants come to this process, not to init (Linux only): whatever a target
    double-forks stays where it can be found and killed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
