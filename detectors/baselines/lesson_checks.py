"""The lesson's own seven checks (seed 003, «Практика»), as a suite.

The worked example, the 1/√d_k scale against the formula, causality (zeros above the diagonal),
agreement with a loop reference, and a batch — each on the small square shapes a course uses
(T = 4, d_k = d_v = 8, B = 2, as in the lesson's PyTorch listing). Good tests for a student;
what they leave out (rectangular and padding masks, heads, large logits, low precision, state,
gradients) is what the full suite adds.
"""

import math

import numpy as np

from detectors.kit import expect, lessons
from detectors.kit.battery import SelfCall
from detectors.kit.lesson_calls import as_call, example, unbatched
from detectors.kit.needs import ATTENTION, CAUSAL_MASK, SELF_ATTENTION
from detectors.kit.specs import SelfSpec

PROPERTY = "The lesson's checks: its example, the 1/√d_k scale, zeros above the diagonal, a loop reference and a batch."
CLAUSES = ("C1", "C2", "C3", "C4")
ORACLE = "baseline"
NEEDS = {"attention": ATTENTION,  # every other part builds on the attention checks
         "causal_mask": CAUSAL_MASK.but(functions=("causal_mask", "attention")),
         "self-attention": SELF_ATTENTION.but(functions=("causal_self_attention", "attention"))}


def formula(q, k, v, mask=None):
    """softmax(QKᵀ/√d_k)V as the lesson writes it, in NumPy."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def loop(q, k, v, mask):
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = [q[i] @ k[j] / math.sqrt(q.shape[1]) if mask[i, j] else -math.inf
             for j in range(k.shape[0])]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        out[i] = sum(wj * v[j] for j, wj in enumerate(w)) / sum(w)
    return out


def check(subject, battery):
    with subject.at("float64"):  # a typical suite tests at float64, whatever the run's dtype
        suite(subject)


def suite(subject):
    rng = np.random.default_rng(0)
    ok = lambda got, want: np.allclose(got, want, atol=1e-6)  # noqa: E731
    if subject.uses("causal_mask"):
        m = subject.causal_mask(3)
        with subject.case("check 1", m):
            expect.holds(np.array_equal(m.out, lessons.MASK003),
                         "causal_mask(3) as printed in the lesson", str(m.out.tolist()))
    call = example("check 2: the lesson example", lessons.Q003, lessons.MASK003, subject)
    a = subject.attend(call, weights=True)
    w, out = unbatched(a.weights, (3, 3)), unbatched(a.out, (3, 2))
    with subject.case(call.name, a):
        expect.holds(w.shape == (3, 3) and np.allclose(np.round(w, 3), lessons.WEIGHTS003_PRINTED),
                     "the lesson's weights", str(np.round(w, 3).tolist()))
        expect.holds(out.shape == (3, 2) and np.allclose(np.round(out, 3), lessons.OUT003_PRINTED),
                     "the lesson's output", str(np.round(out, 3).tolist()))
    q, k, v = (np.round(rng.standard_normal((4, 8)) * 8) / 8 for _ in range(3))
    causal = np.tril(np.ones((4, 4), dtype=bool))
    a = subject.attend(as_call(subject, q, k, v, name="check 3: scale"))
    with subject.case("check 3: scale", a):
        expect.holds(ok(unbatched(a.out, (4, 8)), formula(q, k, v)), "softmax(QKᵀ/√d_k)V",
                     "a different output")
    a = subject.attend(as_call(subject, q, k, v, causal, "check 4: loop"), weights=True)
    with subject.case("check 4: loop", a):
        expect.holds(ok(unbatched(a.out, (4, 8)), loop(q, k, v, causal)), "the loop reference",
                     "a different output")
    wts = unbatched(a.weights, (4, 4))
    with subject.case("check 5: causality", a):
        expect.holds(wts.shape == (4, 4) and np.all(np.triu(wts, 1) == 0),
                     "zeros above the diagonal", "non-zero weights")
    if subject.uses("self-attention"):
        x = np.round(rng.standard_normal((2, 4, 16)) * 8) / 8
        ws = [np.round(rng.standard_normal((16, 8)) * 8) / 8 / 4 for _ in range(3)]
        call = SelfCall(SelfSpec("check 6: batch", x.shape, 8, 8), x, *ws, "check 6: batch")
        a = subject.self_attend(call)
        q, k, v = call.projections()
        want = np.stack([formula(q[b], k[b], v[b], causal) for b in range(2)])
        with subject.case(call.name, a):
            expect.holds(a.out.shape == (2, 4, 8) and ok(a.out, want),
                         "each item as the formula gives it", "a different batch")
