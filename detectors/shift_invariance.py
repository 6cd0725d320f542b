"""Adding the same constant to every score in a row changes nothing, however large it is.

Softmax is shift-invariant (seed 000: «вычитаем максимум для численной устойчивости (результат
не меняется)»), so stability is a metamorphic relation: shift each row's scores far past where
``exp`` overflows (and, negatively, underflows) and demand the same answer. Scores are shifted
through the inputs — an extra key dimension whose product is the same for every key — so the
relation reaches softmax inside ``attention``, ``causal_self_attention`` and output-only kernels.
"""

import math
from dataclasses import replace

import numpy as np

from detectors.harness import expect
from detectors.harness.battery import SoftmaxCall
from detectors.harness.tolerance import allowance

PROPERTY = "Adding a constant to every score of a row (±1000 at float64, beyond exp's range) changes nothing."
CLAUSES = ("C2", "C3")
ORACLE = "metamorphic"
SHIFT = {"float64": 1000.0, "float32": 100.0, "bfloat16": 100.0, "float16": 16.0}


def shifted_call(call, shift):
    """Q' = [Q·r, c], K' = [K, 1] so that Q'K'ᵀ/√(E+1) = QKᵀ/√E + shift for every row."""
    E = call.q.shape[-1]
    r = math.sqrt((E + 1) / E)
    c = shift * math.sqrt(E + 1)
    q = np.concatenate([call.q * r, np.full(call.q.shape[:-1] + (1,), c)], axis=-1)
    k = np.concatenate([call.k, np.ones(call.k.shape[:-1] + (1,))], axis=-1)
    spec = replace(call.spec, q=q.shape, k=k.shape)
    return replace(call, spec=spec, q=q, k=k, name=f"{call.name} shifted by {shift:+g}")


def shifted_self_call(call, shift):
    """X' = [X, 1] and projections that append the same column trick."""
    d_model, d_k = call.w_q.shape
    r = math.sqrt((d_k + 1) / d_k)
    c = shift * math.sqrt(d_k + 1)
    x = np.concatenate([call.x, np.ones(call.x.shape[:-1] + (1,))], axis=-1)
    w_q = np.zeros((d_model + 1, d_k + 1))
    w_q[:d_model, :d_k], w_q[d_model, d_k] = call.w_q * r, c
    w_k = np.zeros((d_model + 1, d_k + 1))
    w_k[:d_model, :d_k], w_k[d_model, d_k] = call.w_k, 1.0
    w_v = np.concatenate([call.w_v, np.zeros((1, call.w_v.shape[1]))], axis=0)
    return replace(call, x=x, w_q=w_q, w_k=w_k, w_v=w_v, name=f"{call.name} shifted by {shift:+g}")


def check(subject, battery):
    shift = SHIFT[subject.dtype]
    tested = False
    if subject.contract == "lesson" and not subject.manifest.lacks("softmax"):
        for call in battery.softmax:
            base = subject.softmax(call.x)
            for s in (shift, -shift):
                moved_call = SoftmaxCall(call.x + s, f"{call.name} shifted by {s:+g}")
                moved = subject.softmax(moved_call.x)
                atol = allowance(subject, moved_call, call.expected())
                expect.close(subject, [base, moved], moved.out, base.out, atol, "softmax",
                             moved_call.name, f"softmax(x {s:+g}) should equal softmax(x)")
        tested = True
    if subject.contract == "sdpa" or not subject.manifest.lacks("attention"):
        alignment = subject.target.causal_alignment
        for call in battery.calls(subject.contract, lambda s: s.scale is None):
            if not subject.supports(call):
                continue
            base = subject.attend(call)
            out = call.expected(alignment)[0]
            for s in (shift, -shift):
                moved_call = shifted_call(call, s)
                moved = subject.attend(moved_call)
                expect.close(subject, [base, moved], moved.out, base.out,
                             allowance(subject, moved_call, out), "out", moved_call.name,
                             f"shifting every score by {s:+g} should change nothing")
        tested = True
    if subject.contract == "sdpa" or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            base = subject.self_attend(call)
            out = call.expected()[0]
            for s in (shift, -shift):
                moved_call = shifted_self_call(call, s)
                moved = subject.self_attend(moved_call)
                expect.close(subject, [base, moved], moved.out, base.out,
                             allowance(subject, moved_call, out), "out", moved_call.name,
                             f"shifting every score by {s:+g} should change nothing")
        tested = True
    if not tested:
        subject.need("softmax", "attention")
