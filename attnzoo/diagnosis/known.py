"""Which zoo entries a check's findings look like: the closest signatures in the kill matrix.

A signature is the set of detectors that flag an implementation. Every bug row of the
committed kill matrix (``docs/kill-matrix.json``, seed 0, quick) has one; a check's findings
have one over the detectors it ran. The entries whose signature is closest (Jaccard: shared
detectors over detectors in either, counting only those the check ran) are named with their
lesson and catalogue page, so a flagged textbook kernel reads as a known mistake with a known
fix rather than as a false alarm. It is a resemblance of behaviour, never a verdict: the
verdicts are the detectors'. Entries that show only at a deeper tier have no quick signature
and are never named.
"""

import json
from pathlib import Path

from attnzoo import catalogue
from attnzoo.vocabulary import CELLS
from detectors.kit.verdict import ERROR, NA, UNSUPPORTED, Verdict

MATRIX = Path(__file__).resolve().parents[2] / "docs" / "kill-matrix.json"
CLOSE = 0.5  # the least Jaccard similarity worth naming
NAMED = 3  # at most this many entries


def resembling(findings, contract, backend, matrix=None):
    """[{id, backend, similarity, shared, lesson, page}] closest first, from findings in their
    JSON form; [] when nothing is flagged or no committed matrix is at hand."""
    flagged = {f["detector"] for f in findings if Verdict(f["verdict"]).caught}
    ran = {f["detector"] for f in findings if f["verdict"] not in (NA, UNSUPPORTED, ERROR)}
    data = matrix if matrix is not None else _committed()
    if not flagged or data is None:
        return []
    want = "sdpa" if contract == "sdpa" else backend
    lessons = {e.id: e.meta.lesson for e in catalogue.bugs()}
    out = []
    for row in data.get("rows", ()):
        if row.get("kind") != "bug" or row.get("backend") != want or row["id"] not in lessons:
            continue
        caught = {d for d, c in row["cells"].items()
                  if d in ran and c["cell"] in CELLS and CELLS[c["cell"]].caught}
        if not caught:
            continue
        similarity = len(flagged & caught) / len(flagged | caught)
        if similarity >= CLOSE:
            out.append({"id": row["id"], "backend": want, "similarity": round(similarity, 2),
                        "shared": sorted(flagged & caught), "lesson": lessons[row["id"]],
                        "page": f"docs/catalogue/{row['id']}.md"})
    out.sort(key=lambda r: (-r["similarity"], r["id"]))
    return out[:NAMED]


def _committed():
    try:
        return json.loads(MATRIX.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def lines(resembles):
    """The report's lines for ``resembling``'s answer."""
    if not resembles:
        return []
    out = ["looks like (detectors flagging it as they flag these zoo entries; the verdicts "
           "above stand on their own):"]
    for r in resembles:
        n = len(r["shared"])
        out.append(f"  - {r['id']} ({n} detector{'s' if n != 1 else ''} shared, similarity "
                   f"{r['similarity']:g}): {r['lesson']} See {r['page']}")
    return out
