"""Arguments arrive in the memory layout a request asks for, with the values it holds.

Every array argument — query, key, value, the mask, NumPy or torch — is sent contiguous, as a
transposed view, as a slice at a storage offset, or expanded with stride 0 along the axes its
values do not change on; the caller's in-place refill passes a stride-0 argument anew, and a
reproduction lays its arrays out as they were sent.
"""

import re

import numpy as np
import pytest
from test_kit import run_snippet

from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target
from detectors.kit.battery import Battery
from detectors.kit.calls import Request
from detectors.kit.memory import LAYOUTS, constant_axes, laid_out_array
from detectors.kit.subject import Subject
from reference.lesson_numpy import LessonNumpy
from reference.sdpa import ScaledDotProductAttention

RNG = np.random.default_rng(0)
Q = RNG.standard_normal((2, 3, 4, 5))
K = np.broadcast_to(RNG.standard_normal((1, 3, 6, 5)), (2, 3, 6, 5)).copy()  # same per item
V = RNG.standard_normal((2, 3, 6, 7))
MASK = np.broadcast_to(RNG.random((1, 1, 4, 6)) < 0.7, (2, 3, 4, 6)).copy()  # HF-style
MASK[..., 0] = True


class TorchSeen(ScaledDotProductAttention):
    """The reference, noting each argument's strides, storage offset and values."""

    seen = []

    def __call__(self, query, key, value, attn_mask=None, **kw):
        TorchSeen.seen = [(t.stride(), t.storage_offset(), t.numpy().copy())
                          for t in (query, key, value, attn_mask)]
        return super().__call__(query, key, value, attn_mask, **kw)


class NumpySeen(LessonNumpy):
    """The NumPy reference, noting each argument's strides, offset into its base and values."""

    seen = []

    def attention(self, Q, K, V, mask=None):
        NumpySeen.seen = [(a.strides, _offset(a), a.copy()) for a in (Q, K, V, mask)]
        return super().attention(Q, K, V, mask)


def _offset(a):
    """Elements between the start of the array's base and its own first element."""
    base = a if a.base is None else a.base
    return (a.ctypes.data - base.ctypes.data) // a.itemsize


def _executor(impl, contract, backend):
    return InProcess(Target("seen", "tests/test_memory_layouts.py:seen", contract, backend),
                     obj=impl)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_arguments_arrive_laid_out_with_their_values(layout):
    _executor(TorchSeen(), "sdpa", "torch").run(
        Request("sdpa", (Q, K, V), {"attn_mask": MASK}, layout=layout))
    (q_strides, q_offset, q), (k_strides, _, k), (_, v_offset, v), (m_strides, m_offset, m) = \
        TorchSeen.seen
    for got, sent in ((q, Q), (k, K), (v, V), (m, MASK)):
        assert np.array_equal(got, sent)
    if layout == "transposed":
        assert q_strides == (60, 5, 15, 1) and m_strides == (72, 6, 18, 1)
    if layout == "offset":
        assert q_offset == v_offset == m_offset == 1 and q_strides == (72, 24, 6, 1)
    if layout == "expanded":  # key the same for every item, the mask for every item and head
        assert k_strides[0] == 0 and m_strides[:2] == (0, 0) and 0 not in q_strides
    if layout == "contiguous":
        assert q_strides == (60, 20, 5, 1) and q_offset == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_arguments_arrive_laid_out_with_their_values(layout):
    _executor(NumpySeen(), "lesson", "numpy").run(
        Request("attention", (Q, K, V, MASK), layout=layout))
    (q_strides, q_offset, q), (k_strides, _, k), _, (m_strides, m_offset, m) = NumpySeen.seen
    assert np.array_equal(q, Q) and np.array_equal(k, K) and np.array_equal(m, MASK)
    if layout == "offset":
        assert q_offset == m_offset == 1 and q_strides[-2] == 6 * 8
    if layout == "expanded":
        assert k_strides[0] == 0 and m_strides[:2] == (0, 0) and 0 not in q_strides
    if layout == "transposed":
        assert q_strides == (480, 40, 120, 8)


def test_constant_axes_are_the_ones_expanded():
    assert constant_axes(K) == (0,) and constant_axes(MASK) == (0, 1) and constant_axes(Q) == ()
    expanded = laid_out_array(K, "expanded")
    assert expanded.strides[0] == 0 and not expanded.flags.writeable
    assert laid_out_array(Q, "expanded") is Q  # nothing to expand: sent as it is


def test_a_refill_passes_a_stride_0_argument_anew():
    """No caller can write into an expanded view in place: it expands the new values again."""
    executor = _executor(ScaledDotProductAttention(), "sdpa", "torch")
    first = executor.run(Request("sdpa", (Q, K, V), keep=True, layout="expanded"))
    k2 = K[:, :, ::-1].copy()
    refilled = executor.run(Request("sdpa", (-Q, k2, -V), refill=first.kept, layout="expanded"))
    fresh = executor.run(Request("sdpa", (-Q, k2, -V), layout="expanded"))
    assert np.array_equal(refilled.values[0], fresh.values[0])


def test_a_reproduction_sends_its_arrays_at_the_offset_they_were_sent_at():
    """The storage-offset bug's wrong answer comes back when its snippet is run as printed."""
    target = Target("storage-offset-ignored", "zoo/storage_offset_ignored.py:SDPA", "sdpa",
                    "torch")
    s = Subject(target, InProcess(target))
    call = next(c for c in Battery(0, depth="standard").attention
                if c.spec.name == "inputs-at-an-offset")
    answer = s.attend(call)
    assert not np.allclose(answer.out, call.expected()[0])  # the bug shows on this case
    code = s.evidence([answer]).snippet
    assert re.search(r"laid_out\(torch\.tensor\(\w+, dtype=torch\.float64\), 'offset'\)", code)
    assert np.array_equal(run_snippet(code, s.target, answer.out.shape), answer.out), code
