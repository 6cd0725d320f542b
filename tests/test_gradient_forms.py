"""Gradients asked of some inputs only, and upstream gradients in the layouts a model makes.

The sandbox builds each layout as it says (values equal, memory not), the backward receives it
as built, only the inputs named require grad, and gradients_of_every_input flags each zoo entry
of its family with the right finding while a correct backward in any layout passes.
"""

import numpy as np
import pytest
import torch
from test_detectors import subject

from attnzoo.runner import run
from detectors import by_name
from detectors.kit.battery import Battery
from detectors.kit.memory import LAYOUTS, laid_out
from reference.sdpa import ScaledDotProductAttention, scaled_dot_product_attention
from zoo import mask_gradient_lost_without_qkv_grad as mask_lost
from zoo import mask_gradient_not_summed_over_broadcast as not_summed
from zoo import upstream_gradient_read_as_contiguous as read_contiguous
from zoo.decoys import einsum_backward

DETECTOR = by_name()["gradients_of_every_input"]


@pytest.fixture(scope="module")
def battery():
    return Battery(0)


def test_each_layout_holds_the_same_values_in_other_memory():
    g = torch.arange(2 * 3 * 4 * 5, dtype=torch.float64).reshape(2, 3, 4, 5)
    constant = g[..., :1, :].expand(g.shape).contiguous()  # constant over queries
    transposed, offset = laid_out(g, "transposed"), laid_out(g, "offset")
    expanded = laid_out(constant, "expanded")
    assert torch.equal(transposed, g) and torch.equal(offset, g)
    assert torch.equal(expanded, constant)
    assert transposed.stride() == (60, 5, 15, 1)  # as (N, L, H, Ev) transposed back
    assert expanded.stride()[-2] == 0
    assert offset.storage_offset() == 1 and offset.stride()[-2] == 6
    assert laid_out(g, "contiguous") is g


class _Records(torch.autograd.Function):
    """Identity forward; the backward notes the layout of the upstream gradient it is handed."""

    seen = []

    @staticmethod
    def forward(ctx, out):
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        _Records.seen.append((grad.stride(), grad.storage_offset(), grad.clone()))
        return grad


class Recording(ScaledDotProductAttention):
    def __call__(self, *args, **kwargs):
        return _Records.apply(super().__call__(*args, **kwargs))


def _float_mask_call(battery):
    return next(c for c in battery.calls("sdpa") if c.spec.name == "float-mask")  # (L, S) mask


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_backward_is_handed_the_layout_asked_for(layout, battery):
    call = _float_mask_call(battery)
    g = np.broadcast_to(np.arange(7.0), (2, 3, 4, 7)).copy()  # constant over queries
    _Records.seen.clear()
    subject(Recording(), "recording", "sdpa").attend(call, grad=g, grad_layout=layout)
    stride, offset, values = _Records.seen[0]
    assert np.array_equal(values.numpy(), g)
    assert (stride, offset) == {"contiguous": ((84, 28, 7, 1), 0),
                                "transposed": ((84, 7, 21, 1), 0),
                                "expanded": ((0, 0, 0, 1), 0),
                                "offset": ((96, 32, 8, 1), 1)}[layout]


def test_only_the_inputs_named_require_grad_and_a_float_mask_gets_the_broadcast_sum(battery):
    call = _float_mask_call(battery)
    g = np.random.default_rng(0).standard_normal((2, 3, 4, 7))
    s = subject(scaled_dot_product_attention, "reference", "sdpa")
    grads = s.attend(call, grad=g, wrt=("value", "attn_mask")).grads
    assert grads["query"] is None and grads["key"] is None
    assert grads["value"].shape == (2, 3, 6, 7) and grads["attn_mask"].shape == (4, 6)
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (call.q, call.k, call.v))
    bias = torch.tensor(call.bias).expand(2, 3, 4, 6).clone().requires_grad_(True)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    (out * torch.tensor(g)).sum().backward()
    assert np.allclose(grads["attn_mask"], bias.grad.sum((0, 1)).numpy(), atol=1e-12)
    assert set(s.attend(call, grad=g).grads) == {"query", "key", "value"}  # positional, as before


@pytest.mark.parametrize("module, verdict, found", [
    (not_summed, "killed", "(gradient of sum(out * G), a float mask's summed over the axes "
                           "it broadcasts along), got "),
    (read_contiguous, "killed", "(the same gradients with G the slice [..., 1:] of a wider "
                                "buffer), got "),
    (mask_lost, "killed", "expected a gradient for attn_mask (only attn_mask requiring grad), "
                          "got no gradient reached attn_mask"),
], ids=["not-summed", "read-as-contiguous", "mask-lost"])
def test_each_entry_of_the_family_is_flagged_for_what_it_does(module, verdict, found, battery):
    finding = run(DETECTOR, subject(module.SDPA, module.BUG.id, "sdpa"), battery)
    assert finding.verdict == verdict, finding.message
    assert found in finding.message, finding.message


def test_a_transposed_upstream_gradient_read_as_contiguous_is_a_wrong_answer(battery):
    s = subject(read_contiguous.SDPA, "read-as-contiguous", "sdpa")
    call = _float_mask_call(battery)
    g = np.random.default_rng(1).standard_normal((2, 3, 4, 7))
    plain = s.attend(call, grad=g, grad_layout="contiguous").grads
    transposed = s.attend(call, grad=g, grad_layout="transposed").grads
    assert not np.allclose(plain["value"], transposed["value"])


def test_a_backward_that_takes_every_layout_passes(battery):
    finding = run(DETECTOR, subject(einsum_backward.SDPA, "einsum-backward", "sdpa"), battery)
    assert finding.verdict == "survived", finding.message
