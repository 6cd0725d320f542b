"""What the sandbox does for speed changes nothing else: a frame gathered from many buffers
arrives whole however small the socket's buffer, a frame nobody reads still times out within
the socket's timeout, and the detectors' one BLAS thread is given back afterwards."""

import socket
import threading
import time

import numpy as np
import pytest

from attnzoo.sandbox import session, wire


def small_pair(timeout=None):
    ours, theirs = wire.pair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # many partial sends
    ours.settimeout(timeout)
    return ours, theirs


def test_a_frame_of_many_buffers_arrives_whole_through_a_small_socket_buffer():
    ours, theirs = small_pair(timeout=30.0)
    arrays = [np.arange(n, dtype=np.float64) for n in (0, 1, 5000, 70_000)] + [np.ones(3, bool)]
    sender = threading.Thread(target=wire.send, args=(ours, {"verb": "x"}, arrays))
    sender.start()
    header, buffers = wire.read(theirs, 30.0)
    sender.join()
    assert header == {"verb": "x", "buffers": [a.nbytes for a in arrays]}
    assert [bytes(b) for b in buffers] == [a.tobytes() for a in arrays]
    assert ours.gettimeout() == 30.0  # the socket's own timeout, as it was


def test_a_frame_nobody_reads_times_out_within_the_sockets_timeout():
    ours, _theirs = small_pair(timeout=0.3)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.send(ours, {}, [np.zeros(1 << 20)])  # 8 MiB: far more than the socket holds
    assert time.monotonic() - start < 3.0
    assert ours.gettimeout() == 0.3


def test_the_detectors_blas_thread_count_is_one_and_is_given_back():
    found = session._openblas()
    if not found:
        pytest.skip("this process's NumPy has no OpenBLAS to pin")
    before = [get() for get, _ in found]
    with session.one_blas_thread():
        assert [get() for get, _ in found] == [1] * len(found)
    assert [get() for get, _ in found] == before
