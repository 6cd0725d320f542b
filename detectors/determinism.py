"""The same call twice gives the same answer, bit for bit; ``dropout_p=0`` means no randomness.

A side-effect check: attention at inference is a pure function. Dropout left on (``F.dropout``
trains by default), random tie-breaking or state carried between calls make two identical calls
disagree, which turns every other test into a coin toss.
"""

from detectors.kit import expect

PROPERTY = "Calling twice with identical inputs returns bit-identical results (also with dropout_p=0 passed explicitly)."
CLAUSES = ("C7", "S5")
ORACLE = "side-effect"


def check(subject, battery):
    lesson = subject.contract == "lesson"
    tested = False
    if not lesson or not subject.manifest.lacks("attention"):
        explicit = not lesson and "dropout_p" in subject.manifest.keywords
        for call in battery.calls(subject.contract):
            if not subject.supports(call):
                continue
            first, second = subject.attend(call, weights=lesson), subject.attend(call, weights=lesson)
            expect.equal(subject, [first, second], second.out, first.out, "out", call.name,
                         "the same call made twice")
            if lesson:
                expect.equal(subject, [first, second], second.weights, first.weights, "weights",
                             call.name, "the same call made twice")
            if explicit:
                zero = subject.attend(call, extra={"dropout_p": 0.0})
                expect.equal(subject, [first, zero], zero.out, first.out, "out", call.name,
                             "dropout_p=0.0 passed explicitly should change nothing")
        tested = True
    if not lesson or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            first, second = subject.self_attend(call), subject.self_attend(call)
            expect.equal(subject, [first, second], second.out, first.out, "out", call.name,
                         "the same call made twice")
        tested = True
    if not tested:
        subject.need("attention", "causal_self_attention")
