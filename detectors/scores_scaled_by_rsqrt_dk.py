"""Scores are divided by √d_k — the key width, and nothing else — or multiplied by ``scale``.

Metamorphic relations that pin the scale down without knowing any answer (seed 003, «Зачем
делить на √d_k»): padding Q and K with zero columns from d_k to d_k' while multiplying Q by
√(d_k'/d_k) must change nothing, so the scale follows the key width; padding V with extra
columns must leave the original output columns alone, so it does not follow the value width;
and for an SDPA callable ``scale=s`` must equal multiplying the query by s·√E.
"""

import math
from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.tolerance import allowance

PROPERTY = "Scores scale with 1/√d_k of the key width only (zero-padding d_k, widening V), and scale=s equals Q·s·√E."
CLAUSES = ("C3", "S3")
ORACLE = "metamorphic"
PAD = 3


def padded(call, pad):
    E = call.q.shape[-1]
    r = math.sqrt((E + pad) / E)
    zeros = lambda a: np.zeros(a.shape[:-1] + (pad,))  # noqa: E731
    q = np.concatenate([call.q * r, zeros(call.q)], axis=-1)
    k = np.concatenate([call.k, zeros(call.k)], axis=-1)
    return replace(call, spec=replace(call.spec, q=q.shape, k=k.shape), q=q, k=k,
                   name=f"{call.name} with d_k padded by {pad}")


def widened(call, extra, rng):
    v = np.concatenate([call.v, np.round(rng.standard_normal(call.v.shape[:-1] + (extra,)) * 8) / 8],
                       axis=-1)
    return replace(call, spec=replace(call.spec, v=v.shape), v=v,
                   name=f"{call.name} with V widened by {extra}")


def check(subject, battery):
    if subject.contract == "lesson":
        subject.need("attention")
    rng = np.random.default_rng(battery.seed)
    alignment = subject.target.causal_alignment
    for call in battery.calls(subject.contract, lambda s: s.scale is None):
        if not subject.supports(call):
            continue
        base, atol = expect.baseline(subject, call)
        wider = padded(call, PAD)
        moved = subject.attend(wider)
        expect.close(subject, [base, moved], moved.out, base.out, atol, "out", wider.name,
                     f"zero-padding d_k by {PAD} and rescaling Q should change nothing")
        wide_v = widened(call, PAD + 1, rng)
        moved = subject.attend(wide_v)
        Ev = call.v.shape[-1]
        expect.close(subject, [base, moved], moved.out[..., :Ev], base.out, atol,
                     f"out[..., :{Ev}]", wide_v.name,
                     "extra value columns should leave the original output columns unchanged")
    if subject.contract != "sdpa" or "scale" not in subject.manifest.keywords:
        return
    for call in battery.calls("sdpa", lambda s: s.scale is not None):
        if not subject.supports(call):
            continue
        given = subject.attend(call)
        E = call.q.shape[-1]
        as_query = replace(call, spec=replace(call.spec, scale=None),
                           q=call.q * call.scale * math.sqrt(E), name=f"{call.name} as Q·s·√E")
        folded = subject.attend(as_query)
        expect.close(subject, [given, folded], given.out, folded.out,
                     allowance(subject, call, call.expected(alignment)[0]), "out", call.name,
                     f"scale={call.scale} should equal multiplying Q by scale·√E")
