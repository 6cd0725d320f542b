"""With L ≠ S, ``is_causal`` lets exactly the declared keys through.

Top-left (PyTorch): query i sees keys j <= i. Bottom-right (flash-attention >= 2.1, declared
with ``--causal-alignment bottom-right``): query i sees j <= i + S − L, so the last query sees
every key — what decoding against a KV cache needs. The two agree when L == S, which is why
square tests never tell them apart. Reads the weights through V = I and compares the set of
keys each query row may see against the declaration.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import allowed
from detectors.kit.verdict import NotApplicable

PROPERTY = "With is_causal and L ≠ S, each query row sees exactly the keys its declared alignment allows."
CLAUSES = ("S2",)
ORACLE = "differential"


def keys(row):
    return "{" + ", ".join(str(j) for j in np.flatnonzero(row)) + "}"


def check(subject, battery):
    if subject.contract != "sdpa":
        raise NotApplicable("is_causal is an SDPA argument; the lesson's causal mask is square")
    if "is_causal" not in subject.manifest.keywords:
        raise NotApplicable("the callable takes no is_causal")
    alignment = subject.target.causal_alignment
    for call in battery.calls("sdpa", lambda s: s.causal and "rectangular" in s.tags):
        if not subject.supports(call):
            continue
        answer = subject.attend(call, weights=True)
        keep = allowed(call, alignment)
        expect.same_shape(subject, [answer], answer.weights, keep.shape, "weights", call.name)
        sees = answer.weights != 0
        wrong = np.argwhere((sees != keep).any(axis=-1))
        if len(wrong):
            index = tuple(wrong[0])
            expect.holds(subject, [answer], False,
                         f"query row {index[-1]} to see keys {keys(keep[index])} ({alignment})",
                         f"keys {keys(sees[index])}", call.name, index,
                         f"is_causal with L={call.q.shape[-2]}, S={call.k.shape[-2]}")
