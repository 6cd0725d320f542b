"""The same call twice gives the same answer, bit for bit; ``dropout_p=0`` means no randomness.

A side-effect check: attention at inference is a pure function. Dropout left on (``F.dropout``
trains by default), random tie-breaking or state carried between calls make two identical calls
disagree, which turns every other test into a coin toss.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION

PROPERTY = "Calling twice with identical inputs returns bit-identical results (also with dropout_p=0 passed explicitly)."
CLAUSES = ("C7", "S5")
ORACLE = "side-effect"
NEEDS = {"attention": ATTENTION, "self-attention": SELF_ATTENTION,
         "dropout_p=0": ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",))}
TWICE = "the same call made twice"
NAMES = ("1st f(x)", "2nd f(x)")


def check(subject, battery):
    if subject.uses("attention"):
        dropout = subject.uses("dropout_p=0")
        for call in subject.cases(battery):
            with subject.trial(call):
                weights = subject.weights_free
                first = subject.attend(call, weights=weights)
                second = subject.attend(call, weights=weights)
                with subject.case(call.name, first, second, relation=TWICE):
                    expect.identical(first.out, second.out, names=NAMES)
                    if weights:
                        expect.identical(first.weights, second.weights, "weights", NAMES)
                if dropout:
                    zero = subject.attend(call, extra={"dropout_p": 0.0})
                    with subject.case(call.name, first, zero,
                                      relation="dropout_p=0.0 passed explicitly should change nothing"):
                        expect.identical(first.out, zero.out, names=("f(x)", "f(x, dropout_p=0.0)"))
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                first, second = subject.self_attend(call), subject.self_attend(call)
                with subject.case(call.name, first, second, relation=TWICE):
                    expect.identical(first.out, second.out, names=NAMES)
