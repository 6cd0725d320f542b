"""The backward pass of a call with dropout differentiates the forward it follows, mask included.

A gradient check on S5 and S6, read through V = I so that the forward's output is its dropped,
rescaled weights Ŵ = W ⊙ M / (1 − p), mask M and all. The gradients of ⟨out, G⟩ are then known
from that output alone, with no second draw:

    dV = Ŵᵀ G        dŴ = G Vᵀ = G        dW = dŴ ⊙ M / (1 − p)
    dS = W ⊙ (dW − rowsum(W ⊙ dW))        dQ = scale · dS K        dK = scale · dSᵀ Q

with W the exact undropped weights and M read from the output's zeros. A backward that draws its
own mask (a recompute that does not restore the random state, a kernel that regenerates the
pattern from the wrong offset) differentiates a different sample than the loss was taken on.
It is asked at a middling and a high rate, and at p = 1, where every weight is dropped and
every gradient is exactly 0 (a backward that multiplies by 1/(1 − p) there makes 0 · inf = NaN).

A seed before each call is not what training does: its steps draw where the last call left the
random state. So the middling rate is asked once more without a reseed, right after a call that
drew: a backward that replays the mask from the seed alone, as if every forward drew first after
it (an offset lost, reset to 0), is right after every seed and wrong on every later step.
"""

import math

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import weights_call
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION
from detectors.kit.tolerance import gradient_allowance

PROPERTY = "With dropout, dV = Ŵᵀ G and dQ, dK follow from the forward's own dropped weights Ŵ (the backward uses the forward's mask), at every rate, after a seed or without one; at p = 1 every gradient is 0."
CLAUSES = ("S5", "S6")
ORACLE = "gradient"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",), torch="autograd",
                      why="dropout is an SDPA argument; the lesson contract has none")
RATES = (0.5, 0.95)  # kept and dropped equally often; most dropped
SHAPE = (2, 3, 8, 12)  # (N, H, L, S), E = 4
E = 4


def swap(a):
    return np.swapaxes(a, -1, -2)


def from_forward(dropped, weights, call, upstream, p):
    """dV, dQ and dK of ⟨out, G⟩ implied by the forward's output ``dropped`` (V = I)."""
    keep = dropped != 0
    grad_weights = upstream * keep / (1 - p)  # dW = G ⊙ M / (1 − p)
    rowsum = (weights * grad_weights).sum(axis=-1, keepdims=True)
    grad_scores = weights * (grad_weights - rowsum)
    factor = 1 / math.sqrt(E)
    return {"value": swap(dropped) @ upstream, "query": factor * grad_scores @ call.k,
            "key": factor * swap(grad_scores) @ call.q}


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    call = weights_call(rng, SHAPE, "dropout backward", E=E)  # V = I: out is the weights
    upstream = grid(rng, SHAPE)
    weights = subject.expected(call)[1]
    precision = subject.judge.effective(subject.dtype)

    def judge(answers, p, relation):
        """The gradients of the last of ``answers`` (after the calls before it) against those
        its own output implies, its mask included."""
        answer = answers[-1]
        with subject.case(call.name, *answers):
            expect.same_shape(answer.out, SHAPE)
        want = from_forward(answer.out, weights, call, upstream, p)
        # the same gradients from the subject's own undropped weights: how far its rounding
        # alone moves them (none at float64)
        low = from_forward(answer.out, plain.out, call, upstream, p)
        for name in ("value", "query", "key"):
            got = reached(subject, call, answers, name)
            with subject.case(call.name, *answers, relation=relation):
                low_name = None if precision == "float64" else low[name]
                atol = gradient_allowance(want[name], low_name, precision)
                expect.close(got, want[name], atol, f"d{name}")

    with subject.trial(call):
        plain = subject.attend(call)
        for p in RATES:
            judge((subject.attend(call, extra={"dropout_p": p}, seed=battery.seed,
                                  grad=upstream),),
                  p, f"the gradient of sum(out * G) with the forward's mask, p = {p}")
        # a training loop's next step: drawn where the call before left the random state
        p = RATES[0]
        before = subject.attend(call, extra={"dropout_p": p}, seed=battery.seed)
        judge((before, subject.attend(call, extra={"dropout_p": p}, grad=upstream)), p,
              f"the gradient of sum(out * G) with the forward's mask, p = {p}, not reseeded "
              "after a call that drew")
        every = subject.attend(call, extra={"dropout_p": 1.0}, seed=battery.seed, grad=upstream)
        for name in ("value", "query", "key"):
            got = reached(subject, call, (every,), name)
            with subject.case(call.name, every, relation="p = 1 drops every weight: every "
                              "gradient is exactly 0"):
                expect.close(got, np.zeros_like(got), 0.0, f"d{name}")


def reached(subject, call, answers, name):
    """The gradient of ``name`` in the last of ``answers``; a missing one is this case's
    failure."""
    answer = answers[-1]
    got = answer.grads.get(name) if answer.grads else None
    with subject.case(call.name, *answers):
        expect.holds(got is not None, f"a gradient for {name}", f"no gradient reached {name}")
    return got
