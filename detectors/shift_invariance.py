"""Adding the same constant to every score in a row changes nothing, however large it is.

Softmax is shift-invariant (seed 000: «вычитаем максимум для численной устойчивости (результат
не меняется)»), so stability is a metamorphic relation: shift each row's scores far past where
``exp`` overflows (and, on the next row, the other way, past where it underflows) and demand the
same answer. Rows are shifted in opposite directions, so a maximum taken over the wrong axis —
or over the whole array — leaves some rows stranded. Scores are shifted through the inputs (an
extra key dimension whose product is the same for every key of a row), so the relation reaches
softmax inside ``attention``, ``causal_self_attention`` and output-only kernels.
"""

import math
from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import SoftmaxCall
from detectors.kit.tolerance import allowance

PROPERTY = "Adding a constant to every score of a row (±1000 at float64, alternating by row, beyond exp's range) changes nothing."
CLAUSES = ("C2", "C3")
ORACLE = "metamorphic"
SHIFT = {"float64": 1000.0, "float32": 100.0, "bfloat16": 100.0, "float16": 16.0}


def alternating(n, shift):
    """Row shifts +shift, -shift, +shift, ... (starting with the sign of ``shift``)."""
    return np.where(np.arange(n) % 2 == 0, shift, -shift)


def label(shift):
    return f"rows shifted by {shift:+g}, {-shift:+g}, ..."


def shifted_call(call, shift):
    """Q' = [Q·r, c_i], K' = [K, 1] so that Q'K'ᵀ/√(E+1) = QKᵀ/√E + shift_i on row i."""
    E = call.q.shape[-1]
    r = math.sqrt((E + 1) / E)
    c = alternating(call.q.shape[-2], shift) * math.sqrt(E + 1)  # (L,)
    q = np.concatenate([call.q * r, np.broadcast_to(c[:, None], call.q.shape[:-1] + (1,))], -1)
    k = np.concatenate([call.k, np.ones(call.k.shape[:-1] + (1,))], axis=-1)
    spec = replace(call.spec, q=q.shape, k=k.shape)
    return replace(call, spec=spec, q=q, k=k, name=f"{call.name}, {label(shift)}")


def shifted_self_call(call, shift):
    """X' = [X, a_i, 1]: a_i = ±1 by row feeds Q's extra column, the constant 1 feeds K's."""
    d_model, d_k = call.w_q.shape
    r = math.sqrt((d_k + 1) / d_k)
    c = shift * math.sqrt(d_k + 1)
    signs = alternating(call.x.shape[-2], 1.0)  # (T,)
    extra = np.stack([np.broadcast_to(signs, call.x.shape[:-1]), np.ones(call.x.shape[:-1])], -1)
    x = np.concatenate([call.x, extra], axis=-1)  # (..., T, d_model + 2)
    w_q = np.zeros((d_model + 2, d_k + 1))
    w_q[:d_model, :d_k], w_q[d_model, d_k] = call.w_q * r, c
    w_k = np.zeros((d_model + 2, d_k + 1))
    w_k[:d_model, :d_k], w_k[d_model + 1, d_k] = call.w_k, 1.0
    w_v = np.concatenate([call.w_v, np.zeros((2, call.w_v.shape[1]))], axis=0)
    return replace(call, x=x, w_q=w_q, w_k=w_k, w_v=w_v, name=f"{call.name}, {label(shift)}")


def check(subject, battery):
    shift = SHIFT[subject.dtype]
    tested = False
    if subject.contract == "lesson" and not subject.manifest.lacks("softmax"):
        for call in battery.softmax:
            base = subject.softmax(call.x)
            rows = call.x.shape[-2] if call.x.ndim > 1 else 1
            for s in (shift, -shift):
                moved_call = SoftmaxCall(call.x + alternating(rows, s)[:, None] if call.x.ndim > 1
                                         else call.x + s, f"{call.name}, {label(s)}")
                moved = subject.softmax(moved_call.x)
                atol = allowance(subject, moved_call, call.expected())
                expect.close(subject, [base, moved], moved.out, base.out, atol, "softmax",
                             moved_call.name, f"softmax(x + c_row), {label(s)}, should equal "
                             "softmax(x)")
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
                             f"shifting each row's scores ({label(s)}) should change nothing")
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
                             f"shifting each row's scores ({label(s)}) should change nothing")
        tested = True
    if not tested:
        subject.need("softmax", "attention")
