"""The lessons' worked examples come out as the lessons print them.

The first thing a student checks, and the cheapest oracle there is: a handful of inputs whose
answers were worked out by hand. It catches gross mistakes (no scaling, the wrong mask, the wrong
axis) on the lessons' own 3-token examples, and nothing that needs a batch, a head or a
rectangular mask to show.
"""

import numpy as np

from detectors.kit import expect, lessons
from detectors.kit.battery import SelfCall, SoftmaxCall
from detectors.kit.lesson_calls import example, unbatched
from detectors.kit.needs import ATTENTION, CAUSAL_MASK, SELF_ATTENTION, SOFTMAX
from detectors.kit.specs import SelfSpec

PROPERTY = "The lessons' worked examples (seeds 000 and 003) give the numbers the lessons print."
CLAUSES = ("C1", "C2", "C3", "C4")
ORACLE = "known-answer"
NEEDS = {"causal_mask": CAUSAL_MASK, "softmax": SOFTMAX, "attention": ATTENTION,
         "self-attention": SELF_ATTENTION}


def compare(subject, answer, call, weights, out, case):
    got_w, got_out = unbatched(answer.weights, weights.shape), unbatched(answer.out, out.shape)
    with subject.case(case, answer):
        expect.close(got_w, weights, subject.allowance(call, weights, what="weights"),
                     "weights")
        expect.close(got_out, out, subject.allowance(call, out), "out")


def check(subject, battery):
    if subject.uses("causal_mask"):
        with subject.trial("seed 003 mask"):
            answer = subject.causal_mask(3)
            with subject.case("seed 003 mask", answer):
                expect.equal(answer.out, lessons.MASK003, "mask")
    if subject.uses("softmax"):
        call = SoftmaxCall(lessons.SOFTMAX_X, "seed 000 softmax")
        with subject.trial(call):
            answer = subject.softmax(call.x)
            with subject.case(call.name, answer):
                expect.close(answer.out, lessons.SOFTMAX_EXACT,
                             subject.allowance(call, lessons.SOFTMAX_EXACT), "softmax")
    if subject.uses("attention"):
        for name, q, mask, weights, out in (
            ("seed 000 example", lessons.Q000, None, lessons.WEIGHTS000_EXACT,
             lessons.OUT000_EXACT),
            ("seed 003 example", lessons.Q003, lessons.MASK003, lessons.WEIGHTS003_EXACT,
             lessons.OUT003_EXACT),
        ):
            with subject.trial(name):
                call = example(name, q, mask, subject)
                compare(subject, subject.attend(call, weights=True), call, weights, out, name)
        with subject.trial("seed 003 unmasked"):
            call = example("seed 003 unmasked", lessons.Q003, None, subject)
            answer = subject.attend(call, weights=True)
            row = unbatched(answer.weights, (3, 3))[0]
            with subject.case("seed 003 unmasked", answer):
                expect.close(row, lessons.UNMASKED003_ROW0_EXACT,
                             subject.allowance(call, row, what="weights"), "weights[0]")
    if subject.uses("self-attention"):
        x = np.eye(3)  # X = I makes the projections the lesson's Q, K, V
        call = SelfCall(SelfSpec("seed 003 via X = I", (3, 3), 2, 2), x, lessons.Q003,
                        lessons.K, lessons.V, "seed 003 via X = I")
        with subject.trial(call):
            answer = subject.self_attend(call, weights=True)
            compare(subject, answer, call, lessons.WEIGHTS003_EXACT, lessons.OUT003_EXACT,
                    "seed 003 causal_self_attention(I, Q, K, V)")
