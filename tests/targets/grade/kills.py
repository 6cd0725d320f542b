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


def test_signals_everything_it_finds(attention):
    """Every process it can see but itself (and what it started): the refusals are swallowed."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
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
