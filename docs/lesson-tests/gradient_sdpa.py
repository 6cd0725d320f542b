"""The gradient kind of oracle as a plain pytest test, for an SDPA-style callable.

The fixture ``sdpa`` is a callable with ``F.scaled_dot_product_attention``'s signature.
``torch.autograd.gradcheck`` compares the gradients autograd computes with finite differences
of the function itself: no second implementation is needed, only float64 inputs.

    attnzoo grade docs/lesson-tests/gradient_sdpa.py
"""

import torch


def inputs(*shapes):
    """float64 tensors that ask for gradients, new each call: multiples of 1/8."""
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(s, generator=g, dtype=torch.float64) * 8).round().div(8)
            .requires_grad_() for s in shapes]


def test_gradient_matches_finite_differences(sdpa):
    q, k, v = inputs((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3))  # (N, H, L, E), (N, H, S, E/Ev)
    assert torch.autograd.gradcheck(lambda q, k, v: sdpa(q, k, v), (q, k, v))


def test_gradient_with_a_causal_mask(sdpa):
    q, k, v = inputs((1, 1, 4, 4), (1, 1, 4, 4), (1, 1, 4, 2))
    assert torch.autograd.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))
