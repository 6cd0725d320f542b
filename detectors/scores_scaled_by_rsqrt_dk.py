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
from detectors.kit.needs import ATTENTION

PROPERTY = "Scores scale with 1/√d_k of the key width only (zero-padding d_k, widening V), and scale=s equals Q·s·√E."
CLAUSES = ("C3", "S3")
ORACLE = "metamorphic"
PAD = 3
NEEDS = {"widths": ATTENTION,
         "scale": ATTENTION.but(contracts=("sdpa",), keywords=("scale",),
                                why="scale is an SDPA argument; the lesson contract has none")}


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
    rng = np.random.default_rng(battery.seed)
    if subject.uses("widths"):
        for call in subject.cases(battery, lambda s: s.scale is None):
            with subject.trial(call):
                base, atol = subject.baseline(call)
                wider = padded(call, PAD)
                moved = subject.attend(wider)
                relation = f"zero-padding d_k by {PAD} and rescaling Q should change nothing"
                with subject.case(wider.name, base, moved, relation=relation):
                    expect.agree(base.out, moved.out, atol,
                                 names=("f(x)", f"f(x, d_k padded by {PAD})"))
                wide_v = widened(call, PAD + 1, rng)
                moved = subject.attend(wide_v)
                Ev = call.v.shape[-1]
                with subject.case(wide_v.name, base, moved, relation="extra value columns should "
                                  "leave the original output columns unchanged"):
                    expect.agree(base.out, moved.out[..., :Ev], atol,
                                 names=("f(V)", f"f([V, W])[..., :{Ev}]"))
    if not subject.uses("scale"):
        return
    for call in subject.cases(battery, lambda s: s.scale is not None):
        with subject.trial(call):
            given = subject.attend(call)
            E = call.q.shape[-1]
            as_query = replace(call, spec=replace(call.spec, scale=None),
                               q=call.q * call.scale * math.sqrt(E), name=f"{call.name} as Q·s·√E")
            folded = subject.attend(as_query)
            atol = subject.allowance(call, subject.expected(call)[0])
            relation = f"scale={call.scale} should equal multiplying Q by scale·√E"
            with subject.case(call.name, given, folded, relation=relation):
                expect.agree(folded.out, given.out, atol,
                             names=("f(Q·s·√E)", f"f(Q, scale={call.scale})"))
