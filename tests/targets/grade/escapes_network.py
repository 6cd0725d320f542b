"""A suite that reaches for the network and the terminal (for tests/test_grade_confine.py):
each test passes only where the attempt is refused. ATTNZOO_TEST_PORT names a TCP listener on
127.0.0.1 that the grading test started."""
import os
import socket

import pytest


def _fine(attention):
    assert attention.causal_mask(2).shape == (2, 2)


def test_connects_to_a_local_listener(attention):
    port = int(os.environ["ATTNZOO_TEST_PORT"])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        with pytest.raises(OSError):
            s.connect(("127.0.0.1", port))
    _fine(attention)


def test_listens_on_a_port(attention):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        with pytest.raises(OSError):
            s.bind(("127.0.0.1", 0))
            s.listen()
            with socket.create_connection(s.getsockname(), timeout=5):
                pass
    _fine(attention)


def test_opens_a_unix_socket(attention):
    with pytest.raises(OSError):
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    _fine(attention)


def test_opens_the_terminal(attention):
    for path in ("/dev/tty", "/dev/console", "/dev/ptmx"):
        with pytest.raises(OSError):
            os.close(os.open(path, os.O_RDWR | os.O_NOCTTY))
    _fine(attention)
