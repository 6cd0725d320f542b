"""With L ≠ S, ``is_causal`` lets exactly the declared keys through.

Top-left (PyTorch): query i sees keys j <= i. Bottom-right (flash-attention >= 2.1, declared
with ``--causal-alignment bottom-right``): query i sees j <= i + S − L, so the last query sees
every key — what decoding against a KV cache needs. The two agree when L == S, which is why
square tests never tell them apart. Reads the weights through V = I and compares the set of
keys each query row may see against the declaration (a row that may see none: every key under
a declared ``uniform`` convention, detectors.kit.conventions).
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = "With is_causal and L ≠ S, each query row sees exactly the keys its declared alignment allows."
CLAUSES = ("S2",)
ORACLE = "differential"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("is_causal",),
                      why="is_causal is an SDPA argument; the lesson's causal mask is square")


def keys(row):
    return "{" + ", ".join(str(j) for j in np.flatnonzero(row)) + "}"


def check(subject, battery):
    alignment = subject.target.causal_alignment
    for call in subject.cases(battery, lambda s: s.causal and "rectangular" in s.tags):
        with subject.trial(call):
            answer = subject.attend(call, weights=True)
            keep = subject.seen(call)
            relation = f"is_causal with L={call.q.shape[-2]}, S={call.k.shape[-2]}"
            with subject.case(call.name, answer, relation=relation):
                expect.same_shape(answer.weights, keep.shape, "weights")
                sees = answer.weights != 0
                wrong = np.argwhere((sees != keep).any(axis=-1))
                if len(wrong):
                    index = tuple(wrong[0])
                    expect.fail(f"query row {index[-1]} to see keys {keys(keep[index])} ({alignment})",
                                f"keys {keys(sees[index])}", index)
