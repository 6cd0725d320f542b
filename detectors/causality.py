"""No query sees the future: changing a later token leaves every earlier output unchanged.

A perturbation oracle, and the lesson's own definition of the causal mask (seed 003, «Причинная
маска»): token i looks only at j <= i. It changes one token at a time — its embedding for
``causal_self_attention``, its key and value for ``attention`` under a causal mask or an SDPA
call with ``is_causal`` — and demands that the rows which must not see it stay put. A mask one
position too wide (``np.tril(..., k=1)``), an inverted triangle or a mask that is built but not
applied all leak, whatever the numbers are.
"""

from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import allowed
from detectors.kit.tolerance import allowance

PROPERTY = "Changing token j (its embedding, or its key and value) changes no output row that may not see j."
CLAUSES = ("C1", "C4", "S2")
ORACLE = "perturbation"
BUMP = 2.5  # added to the perturbed token: on the grid, and far larger than any tolerance
FLOOD = 64.0  # multiplies it: its scores leave exp's range, so a shared normaliser shows too


def check(subject, battery):
    tested = False
    if subject.contract == "sdpa" or not subject.manifest.lacks("causal_self_attention"):
        for call in battery.self_attention:
            base = subject.self_attend(call)
            expect.same_shape(subject, [base], base.out, call.expected()[0].shape, "out",
                              call.name)
            atol = allowance(subject, call, call.expected()[0])
            T = call.x.shape[-2]
            for j in range(1, T):
                before = (np.arange(T) < j)[:, None]  # (T, 1): the rows that may not see j
                for how in ("bumped", "flooded"):
                    x = call.x.copy()
                    x[..., j, :] = x[..., j, :] + BUMP if how == "bumped" else x[..., j, :] * FLOOD
                    moved = subject.self_attend(replace(call, x=x))
                    expect.close(subject, [base, moved], np.where(before, moved.out, 0.0),
                                 np.where(before, base.out, 0.0), atol, "out", call.name,
                                 f"rows before token {j} must not change when token {j} is {how}")
            tested = True
    for call in battery.calls(subject.contract, lambda s: "causal" in s.tags):
        if not subject.supports(call):
            continue
        keys_must_not_leak(subject, call)
        tested = True
    if not tested:
        subject.need("causal_self_attention", "attention")


def keys_must_not_leak(subject, call):
    alignment = subject.target.causal_alignment
    base = subject.attend(call)
    atol = allowance(subject, call, call.expected(alignment)[0])
    keep = allowed(call, alignment)  # (..., L, S)
    expect.same_shape(subject, [base], base.out, keep.shape[:-1] + call.v.shape[-1:], "out",
                      call.name)
    for j in range(call.k.shape[-2]):
        blind = ~keep[..., :, j]  # (..., L): rows that may not see key j
        if not blind.any():
            continue
        k, v = call.k.copy(), call.v.copy()
        k[..., j, :] += BUMP
        v[..., j, :] += BUMP
        moved = subject.attend(call.with_(k=k, v=v))
        rows = blind[..., None]  # (..., L, 1)
        expect.close(subject, [base, moved], np.where(rows, moved.out, 0.0),
                     np.where(rows, base.out, 0.0), atol, "out", call.name,
                     f"rows that may not see key {j} must not change when key {j} changes")
