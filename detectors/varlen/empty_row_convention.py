"""Convention probe for rows that see no key (V8): which output does the target give them, and
is it the one it declares (the contract's 0 with LSE −∞ unless it declares another)?

Special inputs: a sequence with keys whose first queries see none under causal (sq > sk), a
window that misses every key, and a sequence with no key at all. Libraries differ here:
flash-attention 3 returns 0 and −∞, flash-attention 2's non-split path 0 and +∞, and HF's
``_unmask_unattended`` lets such a row attend every key of its sequence. The report names the
convention the target follows, so a mismatch is one finding; the other detectors read empty
rows in the declared convention.
"""

import math

import torch

from detectors.kit import varlen

PROPERTY = ("Rows that see no key give the declared empty-row output (0 with LSE -inf by "
            "default).")
CLAUSES = ("V8",)
ORACLE = "special-input"


def expected(case, alignment, convention):
    """(out, lse) the convention gives the case's empty rows (elsewhere the reference's)."""
    out, lse = varlen.reference(case, alignment)
    empty = varlen.empty_rows(case, alignment)
    if convention == "lse +inf":
        lse = torch.where(empty[None, :], torch.full((), math.inf, dtype=lse.dtype), lse)
    elif convention == "unmasked":
        every, every_lse = varlen.reference(case.with_(causal=False, window_size=(-1, -1)),
                                            alignment)
        out = torch.where(empty[:, None, None], every, out)
        lse = torch.where(empty[None, :], every_lse, lse)
    return out, lse


def check(subject):
    probe = varlen.build(subject.seed * 1000 + 950, "rows with no visible key", (5, 3, 4),
                         (2, 0, 6), causal=True).to(subject.dtype)
    out, lse = subject.run(probe, lse=True, raw=True)
    rows = varlen.owned(probe)
    follows = []
    for convention in varlen.EMPTY_ROWS:
        want, want_lse = expected(probe, subject.alignment, convention)
        if lse is None:  # the target declares no LSE: its output tells the conventions apart
            try:
                subject.same(out, want, probe, rows=rows)
                follows.append(convention)
            except varlen.VarlenMismatch:
                pass
            continue
        got_lse = torch.where(torch.isposinf(lse), torch.full_like(lse, -math.inf), lse)
        if convention == "lse +inf":  # +inf is the declared mark: compare where it is due
            if not torch.equal(torch.isposinf(lse[:, rows]), torch.isposinf(want_lse[:, rows])):
                continue
            want_lse = torch.where(torch.isposinf(want_lse), -math.inf, want_lse)
        elif torch.isposinf(lse[:, rows]).any():
            continue
        try:
            subject.same(out, want, probe, rows=rows)
            subject.same(got_lse, want_lse, probe, "lse", rows=rows)
            follows.append(convention)
        except varlen.VarlenMismatch:
            pass
    declared = subject.target.empty_rows
    if declared not in follows:
        seen = follows[0] if follows else f"none of {', '.join(varlen.EMPTY_ROWS)}"
        raise varlen.VarlenMismatch(f"{probe.name}: rows that see no key follow {seen}; the "
                                    f"target declares {declared} (V8)")
