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
from detectors.kit.needs import ATTENTION, SELF_ATTENTION, SOFTMAX

PROPERTY = "Adding a constant to every score of a row (±1000 at float64, alternating by row, beyond exp's range) changes nothing."
CLAUSES = ("C2", "C3")
ORACLE = "metamorphic"
SHIFT = {"float64": 1000.0, "float32": 100.0, "bfloat16": 100.0, "float16": 16.0}
NEEDS = {"softmax": SOFTMAX, "attention": ATTENTION, "self-attention": SELF_ATTENTION}


def alternating(n, shift):
    """Row shifts +shift, -shift, +shift, ... (starting with the sign of ``shift``)."""
    return np.where(np.arange(n) % 2 == 0, shift, -shift)


def label(shift):
    return f"rows shifted by {shift:+g}, {-shift:+g}, ..."


def shifted_scores(call, shift):
    """x + c_i on row i of the lesson softmax's scores (all of x for a single row)."""
    if call.x.ndim == 1:
        return SoftmaxCall(call.x + shift, f"{call.name}, {label(shift)}")
    x = call.x + alternating(call.x.shape[-2], shift)[:, None]  # (..., R, C) + (R, 1)
    return SoftmaxCall(x, f"{call.name}, {label(shift)}")


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


def parts(subject, battery):
    """(calls, how to make one, how to shift its scores, its exact output, names) per part."""
    if subject.uses("softmax"):
        yield (battery.softmax, lambda c: subject.softmax(c.x), shifted_scores,
               SoftmaxCall.expected, ("softmax(x)", "softmax(x + c)"))
    if subject.uses("attention"):
        yield (subject.cases(battery, lambda s: s.scale is None), subject.attend, shifted_call,
               lambda c: subject.expected(c)[0], ("f(x)", "f(x′)"))
    if subject.uses("self-attention"):
        yield (battery.self_attention, subject.self_attend, shifted_self_call,
               lambda c: subject.expected(c)[0], ("f(X)", "f(X′)"))


def check(subject, battery):
    shift = SHIFT[subject.dtype]
    for calls, run, shifted, exact, names in parts(subject, battery):
        for call in calls:
            with subject.trial(call):
                base = run(call)
                for s in (shift, -shift):
                    moved_call = shifted(call, s)
                    moved = run(moved_call)
                    relation = f"shifting each row's scores ({label(s)}) should change nothing"
                    with subject.case(moved_call.name, base, moved, relation=relation):
                        expect.agree(base.out, moved.out, subject.allowance(moved_call, exact(call)),
                                     names=names)
