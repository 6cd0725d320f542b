"""Decoding against a cache gives the last row of the prefill; a chunk of the last queries gives
the prefill's last rows (V3, bottom-right).

Metamorphic: a causal prefill of whole sequences, then the same keys with only the last query
(decode, sq = 1) or the last three (chunked prefill, sq < sk), from a shuffled paged cache, with
and without ALiBi, a window and a cap. Under bottom-right alignment the last query sees the same
keys either way, so the rows must agree. A top-left mask, an ALiBi distance counted from the
chunk's start, or an offset lost at decode make them differ. A target that declares top-left
alignment is not held to it: under top-left a decoding query sees only the first key.
"""

from detectors.kit import varlen

PROPERTY = ("With bottom-right causal alignment, decoding (and chunked prefill) against a cache "
            "equals the matching last rows of the full prefill.")
CLAUSES = ("V2", "V3", "V4", "V6")
ORACLE = "metamorphic"


def prefills(seed):
    lens = (9, 14, 5)
    return [
        varlen.build(seed + 1, "causal prefill from a paged cache", lens, lens, block_size=4,
                     causal=True),
        varlen.build(seed + 2, "causal prefill with ALiBi per batch row, a left window and a "
                     "cap", lens, lens, block_size=3, causal=True, alibi="batch",
                     window=(6, 0), softcap=2.0, q_gain=3.0, Hq=4, Hk=2),
        varlen.build(seed + 3, "causal prefill with ALiBi per head, packed", lens, lens,
                     causal=True, alibi="head"),
    ]


def check(subject):
    if subject.alignment != "bottom-right":
        return  # the property is bottom-right's; top-left targets are judged by the others
    for prefill in prefills(subject.seed * 1000 + 500):
        prefill = subject.plain(prefill.to(subject.dtype))
        if prefill is None:
            continue
        full, _ = subject.run(prefill)
        for n in (1, 3):
            chunk, rows = varlen.last_rows(prefill, n)
            out, _ = subject.run(chunk)
            subject.same(out, full[rows], chunk,
                         relation="should equal the prefill's matching last rows")
