"""A call between a forward and its backward, as a model's next layer makes.

The sandbox makes the second call after the first call's forward and before its backward, in
this process and in a worker alike; backward_follows_its_forward flags a backward that reads
what the last forward left on the module, and passes one that keeps a slot per forward.
"""

import numpy as np
import pytest
import torch
from test_detectors import subject

from attnzoo.checking import run_check
from attnzoo.options import Options
from attnzoo.runner import run
from attnzoo.sandbox import decide
from detectors import by_name
from detectors.kit.battery import Battery
from detectors.kit.calls import Request
from reference.sdpa import ScaledDotProductAttention
from zoo import backward_reads_state_kept_on_the_module as kept_on_module
from zoo.decoys import workspace_slot_per_forward as slots

DETECTOR = by_name()["backward_follows_its_forward"]


class _Noted(torch.autograd.Function):
    """Identity; the backward notes which call's output it differentiates."""

    @staticmethod
    def forward(ctx, out, events, n):
        ctx.events, ctx.n = events, n
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.events.append(f"backward {ctx.n}")
        return grad, None, None


class Ordered(ScaledDotProductAttention):
    """The reference, noting each forward and each backward in the order they happen."""

    def __init__(self):
        self.events = []

    def __call__(self, query, key, value, *args, **kwargs):
        n = sum(e.startswith("forward") for e in self.events) + 1
        self.events.append(f"forward {n}: query[0] = {float(query.flatten()[0]):g}, "
                           f"requires grad {query.requires_grad}")
        return _Noted.apply(super().__call__(query, key, value, *args, **kwargs), self.events, n)


def test_the_second_call_comes_after_the_forward_and_before_its_backward():
    impl = Ordered()
    s = subject(impl, "ordered", contract="sdpa")
    call = Battery(0).calls("sdpa")[0]
    later = {"q": np.full(call.q.shape, 7.0), "k": call.k + 1, "v": call.v - 1}
    answer = s.attend(call, grad=np.ones(call.q.shape[:-1] + call.v.shape[-1:]), between=later)
    assert impl.events == [f"forward 1: query[0] = {call.q.flatten()[0]:g}, requires grad True",
                           "forward 2: query[0] = 7, requires grad True", "backward 1"]
    assert answer.grads["query"].shape == call.q.shape


def test_a_call_between_needs_a_plain_backward():
    call = Battery(0).calls("sdpa")[0]
    target = subject(ScaledDotProductAttention(), "plain", contract="sdpa").target
    with pytest.raises(ValueError, match="between a forward and its backward"):
        decide.encode(Request("sdpa", (call.q, call.k, call.v), between=(call.q, call.k, call.v)),
                      target)


def test_a_backward_reading_the_module_is_flagged_and_a_slot_per_forward_passes():
    battery = Battery(0)
    found = run(DETECTOR, subject(kept_on_module.SDPA, "kept", contract="sdpa"), battery)
    assert found.caught and "with another call made between the forward and its backward" \
        in found.message, found.message
    assert not run(DETECTOR, subject(slots.SDPA, "slots", contract="sdpa"), battery).caught
    # a call and its backward back to back: the module's buffer is that call's, and it passes
    assert not run(by_name()["correct_gradients"], subject(kept_on_module.SDPA, "kept",
                                                           contract="sdpa"), battery).caught


def test_a_worker_makes_the_call_between_as_well():
    """``attnzoo check`` runs the target in a worker: the second call crosses the wire."""
    for locator, caught in (("zoo/backward_reads_state_kept_on_the_module.py:SDPA", True),
                            ("zoo/decoys/workspace_slot_per_forward.py:SDPA", False)):
        sections, _, _, _ = run_check(locator, Options.build(
            depth="quick", only=["backward_follows_its_forward"]))
        (finding,) = sections[0]["findings"]
        assert finding.caught is caught, finding.message
