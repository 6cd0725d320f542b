"""A call never modifies the caller's arrays.

A side-effect check: every argument is compared, bit for bit, before and after each call of
every function. In-place habits — ``Q /= sqrt(d)``, ``x -= x.max()``, ``mask.logical_not_()`` —
save a copy and silently corrupt the caller's tensors, which then give a different answer the
next time they are used.

A write put back before the call returns leaves the bytes as they were, and is still a write: a
concurrent reader of the caller's array sees it, and it fails on a read-only or shared buffer.
The first and the largest case are called once more with NumPy inputs read-only (a write
raises) or with torch's version counter of each input watched (every in-place op moves it).

The backward is part of the call. The tensors it saved are the caller's own, so a backward that
writes into them — a gradient stored in its input's memory to spare an allocation, an input
rescaled in place — hands back the right gradients and leaves the caller's query or key holding
something else. The same two cases are differentiated, and the arguments read back after the
backward.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION, SELF_ATTENTION, SOFTMAX

PROPERTY = "No function of the contract modifies any of its arguments, in its forward or its backward."
CLAUSES = ("C7", "S6")
ORACLE = "side-effect"
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION, "self-attention": SELF_ATTENTION,
         "backward": ATTENTION.but(contracts=("sdpa",), torch="autograd",
                                   why="a backward is SDPA's (S6); the lesson contract has none")}


GUARDED = ("the same call with read-only NumPy inputs or watched torch version counters: a "
           "write put back before returning")
BACKWARD = "the arguments read back after the backward of sum(out * G)"


def unchanged(subject, answer, case, relation=""):
    with subject.case(case, answer, relation=relation):
        expect.holds(not answer.mutated, f"{', '.join(answer.mutated)} left unchanged",
                     f"{', '.join(answer.mutated)} modified by the call")


def check(subject, battery):
    if subject.uses("softmax"):
        for call in battery.softmax:
            with subject.trial(call):
                unchanged(subject, subject.softmax(call.x, inputs=True), call.name)
        for call in battery.softmax[:1]:
            with subject.trial(call):
                answer = subject.softmax(call.x, inputs=True, guarded=True)
                unchanged(subject, answer, call.name, GUARDED)
    if subject.uses("attention"):
        cases = subject.cases(battery)
        for call in cases:
            with subject.trial(call):
                unchanged(subject, subject.attend(call, inputs=True), call.name)
        for call in {id(c): c for c in cases[:1] + cases[-1:]}.values():
            with subject.trial(call):
                answer = subject.attend(call, inputs=True, guarded=True)
                unchanged(subject, answer, call.name, GUARDED)
    if subject.uses("backward"):
        rng = np.random.default_rng(battery.seed)
        cases = subject.cases(battery)
        for call in {id(c): c for c in cases[:1] + cases[-1:]}.values():
            with subject.trial(call):
                upstream = grid(rng, subject.expected(call)[0].shape)
                answer = subject.attend(call, inputs=True, grad=upstream)
                unchanged(subject, answer, call.name, BACKWARD)
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                unchanged(subject, subject.self_attend(call, inputs=True), call.name)
