"""The backward pass is the derivative of the forward pass.

A gradient oracle for torch implementations (S6): the gradients of ⟨out, G⟩ with respect to
every input must equal the reference's autograd gradients, and ``torch.autograd.gradcheck``
(finite differences in float64) must pass. A hand-written backward can be wrong while every
forward test passes — a missing term of the softmax Jacobian, a missing scale, a transposed
product — and a ``detach`` in the forward silently stops gradients from reaching Q and K.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import explicit
from detectors.kit.battery import grid
from detectors.kit.needs import ATTENTION, SELF_ATTENTION
from detectors.kit.tolerance import FLOAT64_ATOL, reference_subject, scale

PROPERTY = "Gradients of every input equal the reference's autograd gradients, and gradcheck passes in float64."
CLAUSES = ("S6",)
ORACLE = "gradient"
NEEDS = {"attention": ATTENTION.but(torch="autograd"),
         "self-attention": SELF_ATTENTION.but(torch="autograd")}


def compare(subject, answer, want, case):
    for name, expected in want.items():
        got = answer.grads.get(name) if answer.grads else None
        if expected is None:
            continue
        if got is None:
            with subject.case(case, answer):
                expect.fail(f"a gradient for {name}", f"no gradient reached {name}")
        with subject.case(case, answer, relation="gradient of sum(out * G)"):
            expect.close(got, expected, FLOAT64_ATOL * scale(expected), f"d{name}")


def tiny_calls(subject, rng):
    """Small masked calls for gradcheck, whose cost grows with inputs × outputs."""
    from detectors.kit.battery import Call, Spec

    lead = (1, 2) if subject.heads_axis else (2,)
    q, k, v = grid(rng, lead + (3, 2)), grid(rng, lead + (4, 2)), grid(rng, lead + (4, 3))
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1]], dtype=bool)
    calls = [Call(Spec("gradcheck (masked)", q.shape, k.shape, v.shape, mask="given"), q, k, v,
                  mask, name="gradcheck (masked)")]
    calls.append(Call(Spec("gradcheck (is_causal)", q.shape, k.shape, v.shape, causal=True),
                      q, k, v, name="gradcheck (is_causal)"))
    return [c for c in calls if subject.supports(c)]


def check(subject, battery):
    reference = reference_subject(subject, "torch")
    rng = np.random.default_rng(battery.seed)
    if subject.uses("attention"):
        for call in subject.cases(battery):
            upstream = grid(rng, call.expected(subject.target.causal_alignment)[0].shape)
            answer = subject.attend(call, dtype="float64", grad=upstream)
            same = explicit(call, subject.target.causal_alignment)  # the reference is top-left
            want = reference.attend(same, dtype="float64", grad=upstream)
            compare(subject, answer, want.grads, call.name)
        for call in tiny_calls(subject, rng):
            passed, complaint, answer = subject.gradcheck(call)
            with subject.case(call.name, answer):
                expect.holds(passed, "torch.autograd.gradcheck to pass",
                             f"gradcheck failed: {complaint}")
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            upstream = grid(rng, call.expected()[0].shape)
            answer = subject.self_attend(call, dtype="float64", grad=upstream)
            want = reference.self_attend(call, dtype="float64", grad=upstream)
            compare(subject, answer, want.grads, call.name)
