"""An honest SDPA suite, backward included (for tests/test_grade_proxy.py): graded through the
proxy, and called directly on each implementation, it must grade the same."""
import math

import torch


def inputs(requires_grad=False):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def formula(q, k, v, mask=None):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def test_forward(sdpa):
    q, k, v = inputs()
    torch.testing.assert_close(sdpa(q, k, v), formula(q, k, v))


def test_causal(sdpa):
    q, k, v = inputs()
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(sdpa(q, k, v, is_causal=True), formula(q, k, v, mask))


def test_inputs_untouched(sdpa):
    q, k, v = inputs()
    before = [t.clone() for t in (q, k, v)]
    sdpa(q, k, v)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), before))


def test_backward(sdpa):
    q, k, v = inputs(True)
    w = torch.linspace(-1, 1, 2 * 2 * 5 * 8, dtype=torch.float64).reshape(2, 2, 5, 8)
    (sdpa(q, k, v) * w).sum().backward()
    got = [t.grad for t in (q, k, v)]
    q2, k2, v2 = inputs(True)
    (formula(q2, k2, v2) * w).sum().backward()
    for a, b in zip(got, (q2.grad, k2.grad, v2.grad)):
        torch.testing.assert_close(a, b)


def test_float32_keeps_dtype(sdpa):
    q, k, v = (t.float() for t in inputs())
    assert sdpa(q, k, v).dtype == torch.float32
