"""A call never modifies the caller's arrays.

A side-effect check: every argument is compared, bit for bit, before and after each call of
every function. In-place habits — ``Q /= sqrt(d)``, ``x -= x.max()``, ``mask.logical_not_()`` —
save a copy and silently corrupt the caller's tensors, which then give a different answer the
next time they are used.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION, SOFTMAX

PROPERTY = "No function of the contract modifies any of its arguments."
CLAUSES = ("C7",)
ORACLE = "side-effect"
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION, "self-attention": SELF_ATTENTION}


def unchanged(subject, answer, case):
    with subject.case(case, answer):
        expect.holds(not answer.mutated, f"{', '.join(answer.mutated)} left unchanged",
                     f"{', '.join(answer.mutated)} modified by the call")


def check(subject, battery):
    if subject.uses("softmax"):
        for call in battery.softmax:
            with subject.trial(call):
                unchanged(subject, subject.softmax(call.x, inputs=True), call.name)
    if subject.uses("attention"):
        for call in subject.cases(battery):
            with subject.trial(call):
                unchanged(subject, subject.attend(call, inputs=True), call.name)
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                unchanged(subject, subject.self_attend(call, inputs=True), call.name)
