"""Equivalent ways of writing a mask give the same answer.

A metamorphic relation over S1: an all-True mask is no mask; a bool mask is the float mask with
0 where it is True and −∞ where it is False; a float mask of zeros is no mask; and because a
float mask is *added* to the scores, adding the same constant to a whole row of it changes
nothing. Treating a float mask as bool, adding a bool mask as 0/1, inverting the convention or
multiplying instead of adding all break one of these.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.tolerance import allowance
from detectors.kit.verdict import NotApplicable

PROPERTY = "All-True ≡ no mask; bool ≡ its {0, −∞} float mask; zero float mask ≡ none; a row constant added to a float mask changes nothing."
CLAUSES = ("C3", "S1")
ORACLE = "metamorphic"


def check(subject, battery):
    if subject.contract == "lesson":
        subject.need("attention")
    alignment = subject.target.causal_alignment
    calls = [c for c in battery.calls(subject.contract, lambda s: not s.causal)
             if subject.supports(c)]
    bare = [c for c in calls if c.mask is None and c.bias is None]
    sdpa = subject.contract == "sdpa"
    if sdpa and "attn_mask" not in subject.manifest.keywords:
        raise NotApplicable("the callable takes no attn_mask")
    for call in bare:
        base = subject.attend(call)
        atol = allowance(subject, call, call.expected(alignment)[0])
        shape = call.q.shape[:-1] + call.k.shape[-2:-1]  # (..., L, S)
        full = subject.attend(call.with_(mask=np.ones(shape, dtype=bool)))
        expect.close(subject, [base, full], full.out, base.out, atol, "out", call.name,
                     "an all-True mask should equal no mask")
        if sdpa:
            zeros = subject.attend(call.with_(bias=np.zeros(shape)))
            expect.close(subject, [base, zeros], zeros.out, base.out, atol, "out", call.name,
                         "a float mask of zeros should equal no mask")
    if not sdpa:
        return
    for call in calls:
        atol = allowance(subject, call, call.expected(alignment)[0])
        if call.mask is not None:
            as_bool = subject.attend(call)
            bias = np.where(call.mask, 0.0, -np.inf)
            as_float = subject.attend(call.with_(mask=None, bias=bias))
            expect.close(subject, [as_bool, as_float], as_float.out, as_bool.out, atol, "out",
                         call.name, "the bool mask and its {0, -inf} float mask should agree")
        if call.bias is not None:
            base = subject.attend(call)
            L = call.bias.shape[-2]
            rows = np.where(np.arange(L) % 2 == 0, 3.0, -5.0)[:, None]  # (L, 1)
            moved = subject.attend(call.with_(bias=call.bias + rows))
            expect.close(subject, [base, moved], moved.out, base.out, atol, "out", call.name,
                         "adding a constant to a whole row of the float mask should change nothing")
