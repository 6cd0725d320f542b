"""A batch is its items: attending to a batch equals attending to each item alone.

A metamorphic relation across the leading axis. Items of a batch differ here — different
padding lengths, different per-example masks — so an implementation that mixes them up (a
softmax over the batch axis, a mask taken from item 0, ``K.T`` reversing every axis, keys
flattened across the batch) gives a batched answer that no single item reproduces.
"""

from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION

PROPERTY = "Attending to a batch gives, for each item, what attending to that item alone gives."
CLAUSES = ("C3", "C4")
ORACLE = "metamorphic"
NEEDS = {"attention": ATTENTION, "self-attention": SELF_ATTENTION}
RELATION = "item {b} alone should equal item {b} of the batch"


def item(a, b, rank, keep_rank):
    """Item b of an array whose leading axis is the batch, if it has one of full rank."""
    if a is None or a.ndim < rank:
        return a
    if a.shape[0] == 1:
        return a if keep_rank else a[0]
    return a[b:b + 1] if keep_rank else a[b]


def check(subject, battery):
    keep_rank = subject.heads_axis  # SDPA shapes stay (N, ..., H, L, E)
    if subject.uses("attention"):
        for call in subject.cases(battery, lambda s: len(s.q) >= 3 and s.q[0] > 1):
            with subject.trial(call):
                whole, atol = subject.baseline(call)
                rank = call.q.ndim
                for b in range(call.q.shape[0]):
                    parts = {n: item(getattr(call, n), b, rank, keep_rank)
                             for n in ("q", "k", "v", "mask", "bias")}
                    spec = replace(call.spec, q=parts["q"].shape, k=parts["k"].shape,
                                   v=parts["v"].shape)
                    alone = subject.attend(replace(call, spec=spec, **parts))
                    got = whole.out[b:b + 1] if keep_rank else whole.out[b]
                    with subject.case(call.name, whole, alone, relation=RELATION.format(b=b)):
                        expect.agree(got, alone.out, atol, names=(f"f(batch)[{b}]", f"f(item {b})"))
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                if call.x.ndim < 3:
                    continue
                whole = subject.self_attend(call)
                out = subject.expected(call)[0]
                with subject.case(call.name, whole):
                    expect.same_shape(whole.out, out.shape)
                atol = subject.allowance(call, out)
                for b in range(call.x.shape[0]):
                    single = replace(call, x=np.ascontiguousarray(call.x[b]))
                    alone = subject.self_attend(single)
                    with subject.case(call.name, whole, alone, relation=RELATION.format(b=b)):
                        expect.agree(whole.out[b], alone.out, atol,
                                     names=(f"f(batch)[{b}]", f"f(item {b})"))
