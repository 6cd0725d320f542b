"""A call never modifies the caller's arrays.

A side-effect check: every argument is compared, bit for bit, before and after each call of
every function. In-place habits — ``Q /= sqrt(d)``, ``x -= x.max()``, ``mask.logical_not_()`` —
save a copy and silently corrupt the caller's tensors, which then give a different answer the
next time they are used.
"""

from detectors.kit import expect

PROPERTY = "No function of the contract modifies any of its arguments."
CLAUSES = ("C7",)
ORACLE = "side-effect"


def unchanged(subject, answer, case):
    if answer.mutated:
        expect.holds(subject, [answer], False, f"{', '.join(answer.mutated)} left unchanged",
                     f"{', '.join(answer.mutated)} modified by the call", case)


def check(subject, battery):
    lesson = subject.contract == "lesson"
    tested = False
    if lesson and not subject.manifest.lacks("softmax"):
        for call in battery.softmax:
            unchanged(subject, subject.softmax(call.x), call.name)
        tested = True
    if not lesson or not subject.manifest.lacks("attention"):
        for call in battery.calls(subject.contract):
            if subject.supports(call):
                unchanged(subject, subject.attend(call), call.name)
        tested = True
    if not lesson or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            unchanged(subject, subject.self_attend(call), call.name)
        tested = True
    if not tested:
        subject.need("softmax", "attention", "causal_self_attention")
