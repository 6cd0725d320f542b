"""The backward pass is the derivative of the forward pass.

A gradient oracle for torch implementations (S6): the gradients of ⟨out, G⟩ with respect to
every input must equal the reference's autograd gradients, and ``torch.autograd.gradcheck``
(finite differences in float64) must pass. A hand-written backward can be wrong while every
forward test passes — a missing term of the softmax Jacobian, a missing scale, a transposed
product — and a ``detach`` in the forward silently stops gradients from reaching Q and K.
The reference gives a row with no allowed key zeros; under a declared ``uniform`` convention
its gradients are those of the uniform row (detectors.kit.conventions).
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import explicit
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION, SELF_ATTENTION
from detectors.kit.tolerance import gradient_allowance

PROPERTY = "Gradients of every input equal the reference's autograd gradients, and gradcheck passes in float64."
# gradcheck's finite differences: meaningful only on float64 answers computed to float64 accuracy
GRADCHECK_DTYPE = "float64"
CLAUSES = ("S6",)
ORACLE = "gradient"
NEEDS = {"attention": ATTENTION.but(torch="autograd"),
         "self-attention": SELF_ATTENTION.but(torch="autograd")}
# gradcheck's finite differences cost two calls per input element: the kill matrix's tier
# checks the masked call, the deeper tiers the is_causal one as well
GRADCHECKED = {"quick": 1}


def compare(subject, answer, want, case, low=None, precision="float64"):
    """The subject's gradients against the reference's float64 ones (``want``), allowing what
    the reference's own gradients at the subject's measured precision (``low``) are off by."""
    for name, expected in want.items():
        got = answer.grads.get(name) if answer.grads else None
        if expected is None:
            continue
        if got is None:
            with subject.case(case, answer):
                expect.fail(f"a gradient for {name}", f"no gradient reached {name}")
        with subject.case(case, answer, relation="gradient of sum(out * G)"):
            atol = gradient_allowance(expected, None if low is None else low[name], precision)
            expect.close(got, expected, atol, f"d{name}")


def tiny_calls(subject, rng):
    """Small masked calls for gradcheck, whose cost grows with inputs × outputs."""
    from detectors.kit.battery import Call
    from detectors.kit.specs import Spec

    lead = (1, 2) if subject.heads_axis else (2,)
    q, k, v = grid(rng, lead + (3, 2)), grid(rng, lead + (4, 2)), grid(rng, lead + (4, 3))
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1]], dtype=bool)
    calls = [Call(Spec("gradcheck (masked)", q.shape, k.shape, v.shape, mask="given"), q, k, v,
                  mask, name="gradcheck (masked)")]
    calls.append(Call(Spec("gradcheck (is_causal)", q.shape, k.shape, v.shape, causal=True),
                      q, k, v, name="gradcheck (is_causal)"))
    return [c for c in calls if subject.supports(c)]


def reference_grads(attend, call, upstream, precision):
    """The reference's float64 gradients, and its gradients at ``precision`` (None at float64);
    ``attend`` is the reference's attend or self_attend."""
    want = attend(call, dtype="float64", grad=upstream).grads
    low = None if precision == "float64" else attend(call, dtype=precision, grad=upstream).grads
    return want, low


def gradcheck_refused(subject):
    """Why gradcheck cannot judge this run, or None."""
    why = subject.out_of_scope(GRADCHECK_DTYPE)
    if why is None and subject.judge.effective(GRADCHECK_DTYPE) != GRADCHECK_DTYPE:
        why = (f"gradcheck needs float64 accuracy, and float64 inputs are computed to "
               f"{subject.judge.effective(GRADCHECK_DTYPE)} accuracy (computes_at_input_precision)")
    return why


def check(subject, battery):
    reference = subject.judge.reference("torch")
    rng = np.random.default_rng(battery.seed)
    dtype, precision = subject.dtype, subject.judge.effective(subject.dtype)
    if subject.uses("attention"):
        for call in subject.cases(battery):
            with subject.trial(call):
                upstream = grid(rng, subject.expected(call)[0].shape)
                answer = subject.attend(call, dtype=dtype, grad=upstream)
                same = explicit(call, subject.target.causal_alignment)  # the reference is top-left
                want, low = (subject.judge.gradients(call, g, upstream) for g in
                             reference_grads(reference.attend, same, upstream, precision))
                compare(subject, answer, want, call.name, low, precision)
        refused = gradcheck_refused(subject)
        for call in tiny_calls(subject, rng)[:GRADCHECKED.get(battery.depth)]:
            with subject.trial(call):
                if refused:
                    subject.set_aside[call.name] = refused
                    continue
                passed, complaint, answer = subject.gradcheck(call)
                with subject.case(call.name, answer):
                    expect.holds(passed, "torch.autograd.gradcheck to pass",
                                 f"gradcheck failed: {complaint}")
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                upstream = grid(rng, subject.expected(call)[0].shape)
                answer = subject.self_attend(call, dtype=dtype, grad=upstream)
                want, low = reference_grads(reference.self_attend, call, upstream, precision)
                compare(subject, answer, want, call.name, low, precision)
