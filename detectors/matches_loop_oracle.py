"""Every function of the contract agrees with attention written as plain loops.

The differential oracle: the strongest single detector, because the battery varies everything
at once (ranks 2 to 5, shared, per-example, per-head and padding masks, float masks, is_causal
with L ≠ S, scale, grouped heads, large and tiny logits, empty rows). Its weakness is the
message: it says *that* the numbers differ, and the other detectors say *why*.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, CAUSAL_MASK, SELF_ATTENTION, SOFTMAX
from reference import loop_oracle

PROPERTY = "Every function of the contract agrees with the plain-loop oracle on the whole battery."
CLAUSES = ("C1", "C2", "C3", "C4", "C5", "S1", "S2", "S3", "S4")
ORACLE = "differential"
NEEDS = {"causal_mask": CAUSAL_MASK, "softmax": SOFTMAX, "attention": ATTENTION,
         "self-attention": SELF_ATTENTION}


def matches(subject, answer, case, out, weights, call):
    """out (and weights, when the answer has them) against the oracle's."""
    with subject.case(case, answer):
        expect.close(answer.out, out, subject.allowance(call, out))
        if answer.weights is not None:
            expect.close(answer.weights, weights, subject.allowance(call, weights, what="weights"),
                         "weights")


def check(subject, battery):
    if subject.uses("causal_mask"):
        for T in (1, 2, 3, 6):
            with subject.trial(f"causal_mask({T})"):
                answer = subject.causal_mask(T)
                with subject.case(f"causal_mask({T})", answer):
                    expect.equal(answer.out, loop_oracle.causal_mask(T), "mask")
    if subject.uses("softmax"):
        for call in battery.softmax:
            with subject.trial(call):
                answer = subject.softmax(call.x)
                want = subject.expected(call)
                with subject.case(call.name, answer):
                    expect.close(answer.out, want, subject.allowance(call, want), "softmax")
    if subject.uses("attention"):
        for call in subject.cases(battery):
            with subject.trial(call):
                answer = subject.attend(call, weights=subject.weights_free)
                matches(subject, answer, call.name, *subject.expected(call), call)
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                answer = subject.self_attend(call, weights=subject.weights_free)
                matches(subject, answer, call.name, *subject.expected(call), call)
