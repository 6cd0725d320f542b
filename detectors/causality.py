"""No query sees the future: changing a later token leaves every earlier output unchanged.

A perturbation oracle, and the lesson's own definition of the causal mask (seed 003, «Причинная
маска»): token i looks only at j <= i. It changes one token at a time — its embedding for
``causal_self_attention``, its key and value for ``attention`` under a causal mask or an SDPA
call with ``is_causal`` — and demands that the rows which must not see it stay put. A mask one
position too wide (``np.tril(..., k=1)``), an inverted triangle or a mask that is built but not
applied all leak, whatever the numbers are. On long sequences the changed tokens are those of
:func:`~detectors.kit.positions.probed`: tile boundaries, both ends and a seeded sample.

A causal mask built from positions in the inputs' own format (``torch.arange(L,
dtype=q.dtype)``) is exact only up to that format's last exactly represented integer (256 in
bfloat16, 2048 in float16); past it neighbouring positions round together and a query sees the
key after it. So a causal call whose keys run past such a limit is also run in that format, the
first keys past the limit changed (their values by a whole :data:`FLOOD`, so that one leaked key
of a few hundred shows). A row with no allowed key reads every key under a declared ``uniform``
convention (detectors.kit.conventions), and is not asked to stay put.
"""

from dataclasses import replace

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION, SELF_ATTENTION
from detectors.kit.positions import probed
from reference.space import EXACT_INTEGERS

PROPERTY = "Changing token j (its embedding, or its key and value) changes no output row that may not see j."
CLAUSES = ("C1", "C4", "S2")
ORACLE = "perturbation"
BUMP = 2.5  # added to the perturbed token: on the grid, and far larger than any tolerance
FLOOD = 64.0  # multiplies it: its scores leave exp's range, so a shared normaliser shows too
NEEDS = {"self-attention": SELF_ATTENTION, "attention": ATTENTION}
# positions past a format's last exact integer round together (pytorch/pytorch#81926, #137774)
EXACT_UP_TO = {d: EXACT_INTEGERS[d] for d in ("bfloat16", "float16")}
PAST = 8  # keys probed just past the limit: every rounding pattern of bfloat16 repeats by 4


def check(subject, battery):
    if subject.uses("self-attention"):
        for call in battery.self_attention:
            with subject.trial(call):
                base = subject.self_attend(call)
                with subject.case(call.name, base):
                    expect.same_shape(base.out, subject.expected(call)[0].shape)
                atol = subject.allowance(call, subject.expected(call)[0])
                T = call.x.shape[-2]
                for j in probed(T, battery.seed, call.name, start=1):
                    before = (np.arange(T) < j)[:, None]  # (T, 1): the rows that may not see j
                    for how in ("bumped", "flooded"):
                        x = call.x.copy()
                        x[..., j, :] = x[..., j, :] + BUMP if how == "bumped" else x[..., j, :] * FLOOD
                        moved = subject.self_attend(replace(call, x=x))
                        relation = f"rows before token {j} must not change when token {j} is {how}"
                        with subject.case(call.name, base, moved, relation=relation):
                            expect.agree(np.where(before, base.out, 0.0),
                                         np.where(before, moved.out, 0.0), atol,
                                         names=("f(X)", f"f(X with token {j} {how})"))
    if subject.uses("attention"):
        for call in subject.cases(battery, lambda s: "causal" in s.tags):
            with subject.trial(call):
                keys_must_not_leak(subject, call, battery.seed)
                for dtype, keys in past_exact(subject, call):
                    keys_must_not_leak(subject, call, battery.seed, dtype, keys, FLOOD)


def past_exact(subject, call):
    """``[(dtype, keys)]``: the formats this target runs whose exact integers the call's keys
    run past, and the first keys past each limit."""
    S = call.k.shape[-2]
    formats = ("float16", "bfloat16") if subject.backend == "torch" else ("float16",)
    return [(d, list(range(EXACT_UP_TO[d] + 1, min(S, EXACT_UP_TO[d] + 1 + PAST))))
            for d in formats if S > EXACT_UP_TO[d] + 1 and subject.scope in (None, d)]


def keys_must_not_leak(subject, call, seed=0, dtype=None, keys=None, bump=BUMP):
    """Rows that may not see key j keep their output when key j's key and value change (by
    ``bump``), for each key j of ``keys`` (the probed positions by default), at ``dtype``."""
    base = subject.attend(call, dtype=dtype)
    atol = subject.allowance(call, subject.expected(call)[0], dtype)
    keep = subject.seen(call)  # (..., L, S): the keys each row reads
    with subject.case(call.name, base):
        expect.same_shape(base.out, keep.shape[:-1] + call.v.shape[-1:])
    for j in probed(call.k.shape[-2], seed, call.name) if keys is None else keys:
        blind = ~keep[..., :, j]  # (..., L): rows that may not see key j
        if not blind.any():
            continue
        k, v = call.k.copy(), call.v.copy()
        k[..., j, :] += BUMP
        v[..., j, :] += bump
        moved = subject.attend(call.with_(k=k, v=v), dtype=dtype)
        rows = blind[..., None]  # (..., L, 1)
        relation = f"rows that may not see key {j} must not change when key {j} changes"
        with subject.case(call.name, base, moved, relation=relation):
            expect.agree(np.where(rows, base.out, 0.0), np.where(rows, moved.out, 0.0), atol,
                         names=("f(x)", f"f(x with key {j} changed)"))
