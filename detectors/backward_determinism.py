"""The same backward twice gives the same gradients, bit for bit.

A side-effect check on the backward pass, reported apart from :mod:`determinism` (the forward)
because a kernel may honestly not promise it: FlashAttention-2's atomic-add backward and
PyTorch's CUDA SDPA backward are documented as nondeterministic unless asked otherwise. A
reduction whose order depends on which tile finishes first changes the last bits of the
gradients from call to call, while every accuracy check passes — and training runs can no
longer be reproduced.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION, SELF_ATTENTION

PROPERTY = "Two backward calls with identical inputs and upstream gradient return bit-identical gradients."
CLAUSES = ("S6", "C7")
ORACLE = "side-effect"
NEEDS = {"attention": ATTENTION.but(torch="autograd"),
         "self-attention": SELF_ATTENTION.but(torch="autograd")}
TWICE = "the same backward made twice"


def same_gradients(subject, case, first, second):
    for name in sorted(first.grads or {}):
        a, b = first.grads[name], (second.grads or {}).get(name)
        if a is None or b is None:
            continue
        with subject.case(case, first, second, relation=TWICE):
            expect.identical(a, b, f"d{name}", ("1st backward", "2nd backward"))


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    if subject.uses("attention"):
        for call in subject.cases(battery):
            with subject.trial(call):
                upstream = grid(rng, subject.expected(call)[0].shape)
                first = subject.attend(call, grad=upstream)
                second = subject.attend(call, grad=upstream)
                same_gradients(subject, call.name, first, second)
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                upstream = grid(rng, subject.expected(call)[0].shape)
                first = subject.self_attend(call, grad=upstream)
                second = subject.self_attend(call, grad=upstream)
                same_gradients(subject, call.name, first, second)
