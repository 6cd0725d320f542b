"""Every function of the contract agrees with attention written as plain loops.

The differential oracle: the strongest single detector, because the battery varies everything
at once (ranks 2 to 5, shared, per-example, per-head and padding masks, float masks, is_causal
with L ≠ S, scale, grouped heads, large and tiny logits, empty rows). Its weakness is the
message: it says *that* the numbers differ, and the other detectors say *why*.
"""

from detectors.kit import expect
from detectors.kit.tolerance import allowance
from reference import loop_oracle

PROPERTY = "Every function of the contract agrees with the plain-loop oracle on the whole battery."
CLAUSES = ("C1", "C2", "C3", "C4", "C5", "S1", "S2", "S3", "S4")
ORACLE = "differential"


def check(subject, battery):
    alignment = subject.target.causal_alignment
    if subject.contract == "lesson" and not subject.manifest.lacks("causal_mask"):
        for T in (1, 2, 3, 6):
            answer = subject.causal_mask(T)
            expect.equal(subject, [answer], answer.out, loop_oracle.causal_mask(T), "mask",
                         f"causal_mask({T})")
    if subject.contract == "lesson" and not subject.manifest.lacks("softmax"):
        for call in battery.softmax:
            answer = subject.softmax(call.x)
            want = call.expected()
            expect.close(subject, [answer], answer.out, want, allowance(subject, call, want),
                         "softmax", call.name)
    if subject.contract == "sdpa" or not subject.manifest.lacks("attention"):
        lesson = subject.contract == "lesson"
        for call in battery.calls(subject.contract):
            if not subject.supports(call):
                continue
            answer = subject.attend(call, weights=lesson)
            out, weights = call.expected(alignment)
            expect.close(subject, [answer], answer.out, out, allowance(subject, call, out),
                         "out", call.name)
            if lesson:
                expect.close(subject, [answer], answer.weights, weights,
                             allowance(subject, call, weights, what="weights"), "weights",
                             call.name)
    if subject.contract == "sdpa" or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            answer = subject.self_attend(call, weights=subject.contract == "lesson")
            out, weights = call.expected()
            expect.close(subject, [answer], answer.out, out, allowance(subject, call, out),
                         "out", call.name)
            if answer.weights is not None:
                expect.close(subject, [answer], answer.weights, weights,
                             allowance(subject, call, weights, what="weights"), "weights",
                             call.name)
