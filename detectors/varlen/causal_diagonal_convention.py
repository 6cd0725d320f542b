"""Convention probe for causal alignment with sq ≠ sk (V3): which diagonal does the target
follow, and is it the one it declares (bottom-right unless it declares top-left)?

Special inputs: causal calls with fewer queries than keys (decode, chunked prefill) and more
queries than keys, where bottom-right (j ≤ i + sk − sq) and top-left (j ≤ i) differ. The target is
compared with the reference under both conventions; the report names the one it follows, so a
convention mismatch reads as one finding, not as a column of failures.
"""

from detectors.kit import varlen

PROPERTY = ("Causal masking with sq != sk follows the declared alignment (bottom-right by default, "
            "j <= i + sk - sq).")
CLAUSES = ("V3",)
ORACLE = "special-input"


def check(subject):
    probe = varlen.build(subject.seed * 1000 + 900, "causal, sq < sk and sq > sk",
                         (1, 3, 6), (7, 9, 3), causal=True).to(subject.dtype)
    out, _ = subject.run(probe)
    follows = []
    for alignment in varlen.ALIGNMENTS:
        want, _ = varlen.reference(probe, alignment)
        try:
            subject.same(out, want, probe)
            follows.append(alignment)
        except varlen.VarlenMismatch:
            pass
    if subject.alignment not in follows:
        seen = follows[0] if follows else "neither bottom-right nor top-left"
        raise varlen.VarlenMismatch(f"{probe.name}: the causal mask follows {seen}; the target "
                                    f"declares {subject.alignment} (V3)")
