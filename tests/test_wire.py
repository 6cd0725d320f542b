"""What the parent allocates for a worker's reply is bounded by a multiple of the reply.

A frame's length prefix is only a claim: memory is set aside as its bytes arrive. One buffer is
rebuilt into one array at most, so a reply cannot multiply its bytes by pointing every answer
at the same buffer. gradcheck's Jacobians are sized from the reply's output and the inputs sent;
a reply that asks for far more than it sent is malformed before anything is allocated for it.
"""

import json
import threading
import tracemalloc

import numpy as np
import pytest
import torch

from attnzoo.sandbox import decide, gradcheck, wire
from attnzoo.sandbox.target import Target
from detectors.kit.calls import Request
from detectors.kit.verdict import CRASHED, ImplementationFailure

SHAPES = [[1, 2, 3, 2], [1, 2, 4, 2], [1, 2, 4, 3]]  # a gradcheck call's inputs, 52 elements


def frame(header, arrays):
    """(header, buffers) as the parent reads them from a worker that sent them."""
    ours, theirs = wire.pair()
    ours.settimeout(30.0)
    sender = threading.Thread(target=wire.send, args=(ours, header, arrays))
    sender.start()
    try:
        return wire.read(theirs, 30.0)
    finally:
        sender.join()
        ours.close()
        theirs.close()


def test_a_length_prefix_alone_sets_aside_little():
    ours, theirs = wire.pair()
    header = json.dumps({"buffers": [wire.MAX_BODY]}).encode()
    ours.sendall(wire.PREFIX.pack(len(header), wire.MAX_BODY) + header + b"\0" * 1000)
    ours.close()  # 256 MiB announced, 1000 bytes sent
    tracemalloc.start()
    try:
        with pytest.raises(wire.Malformed, match="closed in the middle"):
            wire.read(theirs, 10.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        theirs.close()
    assert peak < 4 * wire.GROWTH


def test_a_frame_arrives_whole_past_the_first_allotment():
    ours, theirs = wire.pair()
    big = np.arange(3 * wire.GROWTH // 8 + 5, dtype=np.float64)  # more than two doublings
    header, buffers = frame({"x": 1}, [big])
    assert header["x"] == 1 and bytes(buffers[0]) == big.tobytes()


def test_two_answers_cannot_be_made_of_one_buffer():
    request = Request("sdpa", tuple(np.ones(s) for s in SHAPES), dtype="float64")
    target = Target("t", "t.py:f", contract="sdpa", backend="torch")
    header, buffers, sent = decide.encode(request, target)
    out = np.ones((1, 2, 3, 3))
    desc = {"array": 0, "dtype": "float64", "shape": list(out.shape)}
    honest = {"values": [desc], "inputs": [], "seconds": 0.1}
    reply, got = frame(honest, [out])
    assert decide.decide(reply, got, sent, buffers, request, target).values[0].shape == out.shape
    gradient = Request("sdpa", request.args, dtype="float64", grad=np.ones(out.shape))
    header, buffers, sent = decide.encode(gradient, target)
    forged = dict(honest, grads={"query": desc, "key": desc, "value": desc})  # one buffer, 4×
    reply, got = frame(forged, [out])
    with pytest.raises(ImplementationFailure, match="two arrays made of buffer 0") as e:
        decide.decide(reply, got, sent, buffers, gradient, target)
    assert e.value.verdict == CRASHED


def test_a_gradcheck_reply_cannot_ask_for_jacobians_far_larger_than_itself():
    """A 1-byte integer output of m elements and backward rows with no gradient in them: the
    two float64 Jacobians (52 × m × 8 bytes each) were once allocated, 30 times the frame."""
    m = 20_000
    data = {"phases": [
        {"data": {"out": {"array": 0, "dtype": "int8", "shape": [m]}, "differentiable": True}},
        {"data": {"columns": [[None, None]] * 52}},
        {"data": {"passes": [[[None, None, None]] * m] * 2}}], "inputs": 3}
    reply, buffers = frame({"gradcheck": data}, [np.zeros(m, np.int8)])
    with pytest.raises(wire.Malformed, match="gradcheck's Jacobians of 1664.* bytes from a reply "
                                             "of 20000: more than 8 times"):
        gradcheck.decide(reply["gradcheck"], buffers, SHAPES, "f(...)")


def test_an_honest_gradcheck_reply_is_within_its_bound():
    """The bound against a reply the worker's own code collects, at the narrowest output."""
    from attnzoo.sandbox import probes

    def half(query, key, value):
        return torch.nn.functional.scaled_dot_product_attention(query, key, value).half()

    target = Target("t", "t.py:f", contract="sdpa", backend="torch")
    args = [torch.from_numpy(np.random.default_rng(0).standard_normal(s)) for s in SHAPES]
    request = {"call": "f(...)", "fn": "sdpa", "wrt": None}
    buffers = []
    data = probes._backend(target).gradcheck(half, args, {}, request, buffers)
    reply, got = frame({"gradcheck": data}, buffers)
    passed, _ = gradcheck.decide(reply["gradcheck"], got, SHAPES, "f(...)")
    assert passed is False  # float16 differences are far off; what matters: it was decided
