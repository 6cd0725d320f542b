"""With grouped-query attention, key/value head j serves query heads j·g … j·g+g−1.

A differential check head by head against the loop oracle (S4: PyTorch's ``enable_gqa`` is
``repeat_interleave`` over the head axis). When a head is wrong it says which key/value head
the implementation actually used, which tells ``repeat`` (h mod H_kv) from ``repeat_interleave``
(h // g) at a glance.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import empty_rows
from detectors.kit.needs import ATTENTION
from reference import loop_oracle

PROPERTY = "Under enable_gqa, query head h reads key/value head h // (H_q / H_kv), as the loop oracle does."
CLAUSES = ("S4",)
ORACLE = "differential"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("enable_gqa",),
                      why="grouped-query attention is an SDPA argument; the lesson has none")


def check(subject, battery):
    alignment = subject.target.causal_alignment
    for call in subject.cases(battery, lambda s: s.gqa):
        with subject.trial(call):
            answer = subject.attend(call)
            out = subject.expected(call)[0]
            with subject.case(call.name, answer):
                expect.same_shape(answer.out, out.shape)
            atol = subject.allowance(call, out)
            H, H_kv = call.q.shape[-3], call.k.shape[-3]
            g = H // H_kv
            for h in range(H):
                got, want = answer.out[..., h, :, :], out[..., h, :, :]
                if np.all(np.abs(got - want) <= atol):
                    continue
                used = [j for j in range(H_kv) if j != h // g and
                        np.all(np.abs(got - head_with(call, h, j, alignment,
                                                      subject.empty_rows)) <= atol)]
                actual = f"output matching key/value head {used[0]}" if used else \
                    "output matching no key/value head"
                with subject.case(call.name, answer,
                                  relation="enable_gqa: kv head j serves heads j*g .. j*g+g-1"):
                    expect.fail(f"query head {h} to read key/value head {h // g} (g = {g})", actual,
                                (h,))


def head_with(call, h, j, alignment, convention="zero"):
    """The oracle's output for query head h if it read key/value head j (its rows with no
    allowed key as ``convention`` has them)."""
    pick = lambda a, i: None if a is None or a.shape[-3] == 1 else a[..., i:i + 1, :, :]  # noqa: E731
    mask = call.mask if call.mask is None or call.mask.ndim < 3 else (
        pick(call.mask, h) if call.mask.shape[-3] > 1 else call.mask)
    bias = call.bias if call.bias is None or call.bias.ndim < 3 else (
        pick(call.bias, h) if call.bias.shape[-3] > 1 else call.bias)
    out, _ = loop_oracle.attend(call.q[..., h:h + 1, :, :], call.k[..., j:j + 1, :, :],
                                call.v[..., j:j + 1, :, :], mask=mask, bias=bias,
                                scale=call.scale, causal=alignment if call.causal else None)
    out = out[..., 0, :, :]  # (..., L, Ev)
    if convention != "uniform":
        return out
    empty = empty_rows(call, alignment)[..., h, :, None]  # (..., L, 1): query head h's empty rows
    return np.where(empty, call.v[..., j, :, :].mean(axis=-2, keepdims=True), out)
