"""Tests that reach for processes outside their own (for tests/test_grade_proxy.py): each may
change its own verdict, never a neighbour's."""
import gc
import os
import signal

import numpy as np


def _mask_ok(attention):
    assert np.array_equal(attention.causal_mask(3), np.tril(np.ones((3, 3), dtype=bool)))


def test_neighbour_before(attention):
    _mask_ok(attention)


def test_signals_its_parent(attention):
    """The worker server: PermissionError where the run is scoped, so this test fails."""
    os.kill(os.getppid(), signal.SIGKILL)


def _parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_signals_everything_it_finds(attention):
    """Every process of the grade it can find but itself: attnzoo, the worker server, every
    row's run and worker (limited to the grade's own tree, so that a kernel that cannot scope
    loses this run, not the machine's other work); the refusals are swallowed."""
    me, attnzoo = os.getpid(), _parent_of(os.getppid())
    parents = {int(n): _parent_of(n) for n in os.listdir("/proc") if n.isdigit()}
    grade, grown = {attnzoo}, True
    while grown:
        more = {p for p, parent in parents.items() if parent in grade} - grade
        grade |= more
        grown = bool(more)
    for pid in sorted(grade - {me}):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    _mask_ok(attention)


def test_ptraces_its_parents(attention):
    """The worker server and attnzoo: PTRACE_ATTACH is refused (Landlock's domain; attnzoo is
    not dumpable either), so nothing here can read their memory."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    server = os.getppid()
    attnzoo = _parent_of(server)
    for pid in (server, attnzoo):
        attached = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
        if attached == 0:
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH at once
        assert attached == -1, f"attached to {pid}"
    _mask_ok(attention)


def test_closes_its_connection(attention):
    """Closes every socket it holds, the one to the implementation among them: it dies."""
    import socket

    for obj in gc.get_objects():
        if isinstance(obj, socket.socket):
            try:
                obj.close()
            except OSError:
                pass
    _mask_ok(attention)


def test_neighbour_after(attention):
    _mask_ok(attention)
