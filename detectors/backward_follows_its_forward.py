"""A backward returns the gradients of its own forward, whatever calls came between the two.

A model calls the same attention once per layer, all forwards first, then every backward in
reverse: between a forward and its backward come the forwards of the layers above. What the
backward needs must travel with its own graph (``ctx.save_for_backward``). A kernel that keeps
it on the module, in a workspace or a global — the probabilities, the log-sum-exp, the inputs
— hands each backward whatever the last forward left there: right in every test that runs a
forward and its backward back to back, wrong in every model with two layers.

Each case is differentiated after a second call with other query, key and value (the same
keywords, as the next layer's) was made between its forward and its backward, and its
gradients are judged against the reference's. Only when they are off is the case
differentiated again without the call between: where it is wrong there too, the backward is
wrong as a whole, which is ``correct_gradients``' finding, and the case is not judged here.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import explicit
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION
from detectors.kit.tolerance import gradient_allowance

PROPERTY = ("A backward made after another call of the same attention returns the gradients "
            "of its own forward.")
CLAUSES = ("S6", "C7")
ORACLE = "gradient"
NEEDS = {"attention": ATTENTION.but(torch="autograd")}
RELATION = "gradient of sum(out * G), with another call made between the forward and its backward"


def wanted(subject, call, upstream):
    """{name: (the reference's float64 gradient, its allowance)} of ``call`` for ``upstream``."""
    reference = subject.judge.reference("torch")
    same = explicit(call, subject.target.causal_alignment)  # the reference is top-left
    precision = subject.judge.effective(subject.dtype)
    exact = subject.judge.gradients(call, reference.attend(same, dtype="float64",
                                                           grad=upstream).grads, upstream)
    low = None if precision == "float64" else subject.judge.gradients(
        call, reference.attend(same, dtype=precision, grad=upstream).grads, upstream)
    return {name: (g, gradient_allowance(g, None if low is None else low[name], precision))
            for name, g in exact.items() if g is not None}


def right(answer, want):
    grads = answer.grads or {}
    return all(grads.get(n) is not None and np.shape(grads[n]) == np.shape(g)
               and expect.within(grads[n], g, atol) for n, (g, atol) in want.items())


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    for call in subject.cases(battery):
        with subject.trial(call):
            upstream = grid(rng, subject.expected(call)[0].shape)
            later = {n: grid(rng, a.shape) for n, a in (("q", call.q), ("k", call.k),
                                                          ("v", call.v))}
            answer = subject.attend(call, grad=upstream, between=later)
            want = wanted(subject, call, upstream)
            if right(answer, want) or not right(subject.attend(call, grad=upstream), want):
                continue  # held, or wrong without a call between: correct_gradients' finding
            for name, (g, atol) in want.items():
                with subject.case(call.name, answer, relation=RELATION):
                    got = (answer.grads or {}).get(name)
                    if got is None:
                        expect.fail(f"a gradient for {name}", f"no gradient reached {name}")
                    expect.close(got, g, atol, f"d{name}")
