"""A result does not depend on what was called before it.

A side-effect check for hidden state: calls of different sizes are made in one order and then
in the reverse order, and each must come out bit-identical both times. A mask cached at the
first size seen, a buffer that grows, a running statistic or a cache keyed on the wrong thing
makes a call's answer depend on its history.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, CAUSAL_MASK, SELF_ATTENTION

PROPERTY = "Each call's result is identical whether it is made before or after calls of other sizes."
CLAUSES = ("C7",)
ORACLE = "side-effect"
NEEDS = {"self-attention": SELF_ATTENTION, "attention": ATTENTION, "causal_mask": CAUSAL_MASK}
RELATION = "the same call, made before and after calls of other sizes"
NAMES = ("1st f(x)", "2nd f(x)")


def in_both_orders(subject, calls, run, name=lambda call: call.name, what="out"):
    forward = subject.answers(calls, run, name)
    backward = dict(subject.answers([c for c, _ in forward][::-1], run, name))
    for call, a in forward:
        if call in backward:  # (a call that failed the second time is recorded already)
            with subject.trial(name(call)), subject.case(name(call), a, backward[call],
                                                         relation=RELATION):
                expect.identical(a.out, backward[call].out, what, NAMES)


def check(subject, battery):
    subject.fresh()  # state left by earlier detectors would hide a first-call cache
    if subject.uses("self-attention"):
        in_both_orders(subject, battery.self_attention, subject.self_attend)
    if subject.uses("attention"):
        in_both_orders(subject, subject.cases(battery), subject.attend)
    if subject.uses("causal_mask"):
        in_both_orders(subject, (2, 5, 3, 7), subject.causal_mask, "causal_mask({})".format,
                       "mask")
