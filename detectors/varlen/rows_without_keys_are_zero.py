"""A query row with no visible key outputs exactly 0 and has LSE −∞, never NaN (V8).

Special inputs: sequences with no key, more queries than keys under causal (the first rows see
nothing), and windows that fall entirely outside the keys. A finite sentinel in place of −∞
spreads such a row evenly over keys it may not see; an unguarded online softmax gives 0/0.
"""

import torch

from detectors.kit import varlen

PROPERTY = "Rows that see no key output exactly 0 with LSE -inf, and no row is NaN."
CLAUSES = ("V8", "V10")
ORACLE = "special-input"


def probes(seed):
    return [
        varlen.build(seed + 1, "windows that miss every key", (6, 4), (2, 9), window=(0, 0)),
        varlen.build(seed + 2, "a right window ahead of the keys", (5,), (3,), window=(-1, 0),
                     causal=True, Hq=4, Hk=2),
    ]


def check(subject):
    extra = [c.to(subject.dtype) for c in probes(subject.seed * 1000 + 700)]
    cases = subject.cases() + [c for c in map(subject.plain, extra) if c is not None]
    for case in cases:
        empty = varlen.empty_rows(case, subject.alignment)
        if not empty.any():
            continue
        out, lse = subject.run(case, lse=True)
        rows = out[varlen.owned(case)]
        if rows.isnan().any():
            raise varlen.VarlenMismatch(f"{case.name}: out has NaN at "
                                        f"{varlen.index(rows.isnan())}")
        at = empty.nonzero().flatten()
        if (out[at] != 0).any():
            bad = int(at[(out[at] != 0).flatten(1).any(1)][0])
            raise varlen.VarlenMismatch(f"{case.name}: row {bad} sees no key, out[{bad}] = "
                                        f"{out[bad].flatten()[:4].tolist()}…, should be 0 (V8)")
        if lse is not None and not torch.isneginf(lse[:, at]).all():
            bad = int(at[~torch.isneginf(lse[:, at]).all(0)][0])
            raise varlen.VarlenMismatch(f"{case.name}: row {bad} sees no key, lse[:, {bad}] = "
                                        f"{lse[:, bad].tolist()}, should be -inf (V8)")
