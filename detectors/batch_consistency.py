"""A batch is its items: attending to a batch equals attending to each item alone.

A metamorphic relation across the leading axis. Items of a batch differ here — different
padding lengths, different per-example masks — so an implementation that mixes them up (a
softmax over the batch axis, a mask taken from item 0, ``K.T`` reversing every axis, keys
flattened across the batch) gives a batched answer that no single item reproduces.
"""

from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.tolerance import allowance

PROPERTY = "Attending to a batch gives, for each item, what attending to that item alone gives."
CLAUSES = ("C3", "C4")
ORACLE = "metamorphic"


def item(a, b, rank, keep_rank):
    """Item b of an array whose leading axis is the batch, if it has one of full rank."""
    if a is None or a.ndim < rank:
        return a
    if a.shape[0] == 1:
        return a if keep_rank else a[0]
    return a[b:b + 1] if keep_rank else a[b]


def check(subject, battery):
    keep_rank = subject.contract == "sdpa"  # SDPA shapes stay (N, ..., H, L, E)
    tested = False
    if subject.contract == "sdpa" or not subject.manifest.lacks("attention"):
        for call in battery.calls(subject.contract, lambda s: len(s.q) >= 3 and s.q[0] > 1):
            if not subject.supports(call):
                continue
            whole = subject.attend(call)
            atol = allowance(subject, call, call.expected(subject.target.causal_alignment)[0])
            expect.same_shape(subject, [whole], whole.out,
                              call.expected(subject.target.causal_alignment)[0].shape, "out",
                              call.name)
            rank = call.q.ndim
            for b in range(call.q.shape[0]):
                parts = {n: item(getattr(call, n), b, rank, keep_rank)
                         for n in ("q", "k", "v", "mask", "bias")}
                spec = replace(call.spec, q=parts["q"].shape, k=parts["k"].shape,
                               v=parts["v"].shape)
                alone = subject.attend(replace(call, spec=spec, **parts))
                got = whole.out[b:b + 1] if keep_rank else whole.out[b]
                expect.close(subject, [whole, alone], alone.out, got, atol, f"out[{b}]",
                             call.name, f"item {b} alone should equal item {b} of the batch")
            tested = True
    if subject.contract == "sdpa" or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            if call.x.ndim < 3:
                continue
            whole = subject.self_attend(call)
            out = call.expected()[0]
            expect.same_shape(subject, [whole], whole.out, out.shape, "out", call.name)
            atol = allowance(subject, call, out)
            for b in range(call.x.shape[0]):
                single = replace(call, x=np.ascontiguousarray(call.x[b]))
                alone = subject.self_attend(single)
                expect.close(subject, [whole, alone], alone.out, whole.out[b], atol, f"out[{b}]",
                             call.name, f"item {b} alone should equal item {b} of the batch")
            tested = True
    if not tested:
        subject.need("attention", "causal_self_attention")
