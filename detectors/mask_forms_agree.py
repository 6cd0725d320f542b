"""Equivalent ways of writing a mask give the same answer.

A metamorphic relation over S1: an all-True mask is no mask; a bool mask is the float mask with
0 where it is True and −∞ where it is False; a float mask of zeros is no mask; and because a
float mask is *added* to the scores, adding the same constant to a whole row of it changes
nothing. Treating a float mask as bool, adding a bool mask as 0/1, inverting the convention or
multiplying instead of adding all break one of these.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "All-True ≡ no mask; bool ≡ its {0, −∞} float mask; zero float mask ≡ none; a row constant added to a float mask changes nothing."
CLAUSES = ("C3", "S1")
ORACLE = "metamorphic"
NEEDS = {"bool": ATTENTION.but(keywords=("attn_mask",)),
         "float": ATTENTION.but(contracts=("sdpa",), keywords=("attn_mask",))}


def agree(subject, call, base, moved, atol, relation, names):
    with subject.case(call.name, base, moved, relation=relation):
        expect.agree(base.out, moved.out, atol, names=names)


def check(subject, battery):
    calls = subject.cases(battery, lambda s: not s.causal)
    floats = subject.uses("float")
    for call in [c for c in calls if c.mask is None and c.bias is None]:
        with subject.trial(call):
            base = subject.attend(call)
            atol = subject.allowance(call, subject.expected(call)[0])
            shape = call.q.shape[:-1] + call.k.shape[-2:-1]  # (..., L, S)
            full = subject.attend(call.with_(mask=np.ones(shape, dtype=bool)))
            agree(subject, call, base, full, atol, "an all-True mask should equal no mask",
                  ("f(x)", "f(x, all-True mask)"))
            if floats:
                zeros = subject.attend(call.with_(bias=np.zeros(shape)))
                agree(subject, call, base, zeros, atol, "a float mask of zeros should equal no mask",
                      ("f(x)", "f(x, zero float mask)"))
    if not floats:
        return
    for call in calls:
        with subject.trial(call):
            atol = subject.allowance(call, subject.expected(call)[0])
            if call.mask is not None:
                as_bool = subject.attend(call)
                bias = np.where(call.mask, 0.0, -np.inf)
                as_float = subject.attend(call.with_(mask=None, bias=bias))
                agree(subject, call, as_bool, as_float, atol,
                      "the bool mask and its {0, -inf} float mask should agree",
                      ("f(x, bool mask)", "f(x, its float mask)"))
            if call.bias is not None:
                base = subject.attend(call)
                L = call.bias.shape[-2]
                rows = np.where(np.arange(L) % 2 == 0, 3.0, -5.0)[:, None]  # (L, 1)
                moved = subject.attend(call.with_(bias=call.bias + rows))
                agree(subject, call, base, moved, atol,
                      "adding a constant to a whole row of the float mask should change nothing",
                      ("f(x, float mask)", "f(x, float mask + row constants)"))
