"""The varlen contract's kill matrix as data: ``docs/kill-matrix-varlen.json``.

Every varlen bug and decoy, and the varlen reference, against every varlen detector, at seed 0,
under the conventions the entry declares. The verdicts are the ones tests/test_varlen_detectors.py
asserts, made the same way: ``detectors.kit.varlen.verdict`` at float64 and float32 for a bug,
at every dtype for a correct row, and ``caught_by`` is judged at the harness's default tier.
A bug row is also run at the tier its ``BUG.depth`` names (where it first shows), and a correct
row at every tier a bug row is run at, so that its false alarms are counted wherever a catch is.
"""

import inspect
import re

from attnzoo.devtools.docs.data import DOCS, settled
from detectors.kit.depths import DEPTHS

JSON_PATH = DOCS / "kill-matrix-varlen.json"
BUG_DTYPES = ("float64", "float32")
CLEAN_DTYPES = ("float64", "float32", "float16", "bfloat16")
CRASH = re.compile(r": raised \w+")  # how the harness words a call that raised


def caught_by_depth():
    """The tier ``caught_by`` is checked at: the harness's default, which the test uses."""
    from detectors.kit import varlen

    return inspect.signature(varlen.check).parameters["depth"].default


def _ordered(depths):
    return [d for d in DEPTHS if d in depths]


def entries():
    """(kind, id, callable, conventions, meta) for the reference, every bug and every decoy."""
    import zoo.varlen as varlen_zoo
    from reference.varlen import attn_varlen

    out = [("reference", "reference", attn_varlen, {}, None)]
    out += [("bug", e.id, varlen_zoo.implementation(e), varlen_zoo.conventions(e), e.meta)
            for e in varlen_zoo.BUGS]
    out += [("decoy", e.id, varlen_zoo.implementation(e), varlen_zoo.conventions(e), e.meta)
            for e in varlen_zoo.DECOYS]
    return out


def current_rows():
    """The rows the matrix has today, without their cells: one per entry and tier."""
    standard = caught_by_depth()
    found = entries()
    bug_tiers = {d for kind, *_, meta in found if kind == "bug"
                 for d in (meta.depth, standard)}
    rows = []
    for kind, entry_id, _, conventions, meta in found:
        bug = kind == "bug"
        tiers = _ordered({meta.depth, standard} if bug else bug_tiers)
        for depth in tiers:
            rows.append({"row": f"{entry_id}@{depth}", "kind": kind, "id": entry_id,
                         "depth": depth, "category": meta.category if bug else "",
                         "expected": list(meta.caught_by) if bug else [],
                         "shows_at": meta.depth if bug else "",
                         "conventions": dict(conventions),
                         "dtypes": list(BUG_DTYPES if bug else CLEAN_DTYPES)})
    return rows


def cell(row, name, outcome, message, standard):
    """The cell's kind, in the SDPA matrix's words (attnzoo.vocabulary.CELLS)."""
    if outcome == "error":
        kind = "error"
    elif outcome == "n/a":
        kind = "na"
    elif row["kind"] != "bug":
        kind = "false" if outcome == "fail" else "pass"
    elif outcome == "fail":
        kind = ("crash" if CRASH.search(message or "") else
                "hit" if name in row["expected"] else "bonus")
    else:
        kind = "miss" if name in row["expected"] and row["depth"] == standard else "pass"
    return {"cell": kind, "verdict": outcome, "message": message}


def run(seed=0, progress=None):
    """Run the matrix; the JSON's document (no timings: it changes only with a verdict)."""
    import numpy
    import torch

    import detectors
    from detectors.kit import varlen

    found = {entry_id: (fn, conventions) for _, entry_id, fn, conventions, _ in entries()}
    names = [d.NAME for d in detectors.varlen_detectors()]
    oracles = {d.NAME: d.ORACLE for d in detectors.varlen_detectors()}
    standard = caught_by_depth()
    rows = current_rows()
    for row in rows:
        if progress:
            progress(row["row"])
        fn, conventions = found[row["id"]]
        target = varlen.Target(fn, row["id"], **conventions)
        row["cells"] = {}
        for d in detectors.varlen_detectors():
            try:
                outcome, message = varlen.verdict(d, target, tuple(row["dtypes"]), seed,
                                                  row["depth"])
            except Exception as error:  # noqa: BLE001 - a detector that breaks is a finding
                outcome, message = "error", f"{type(error).__name__}: {error}"
            row["cells"][d.NAME] = cell(row, d.NAME, outcome, message, standard)
    data = {"contract": "varlen", "seed": seed, "caught_by_depth": standard,
            "versions": {"torch": torch.__version__, "numpy": numpy.__version__},
            "detectors": names, "oracles": oracles, "rows": rows}
    data["summary"] = summary(data)
    data["note"] = ("written by `attnzoo docs`; no timings, so the file changes only when a "
                    "verdict or message does")
    return data


def settle(committed, data):
    """``data`` with cells that differ from the committed ones only past the third digit
    kept as committed (:func:`attnzoo.devtools.docs.data.settled`)."""
    data = settled(committed, data)
    data["summary"] = summary(data)
    return data


def caught(row, names):
    from attnzoo.vocabulary import CAUGHT_CELLS

    return [d for d in names if row["cells"][d]["cell"] in CAUGHT_CELLS]


def summary(data):
    """The counts the pages state, computed once here from the cells."""
    names, standard = data["detectors"], data["caught_by_depth"]
    bugs = [r for r in data["rows"] if r["kind"] == "bug"]
    clean = [r for r in data["rows"] if r["kind"] != "bug"]
    at = {}
    for depth in _ordered({r["depth"] for r in bugs}):
        tier = [r for r in bugs if r["depth"] == depth]
        at[depth] = {"bugs": len(tier), "caught": sum(1 for r in tier if caught(r, names)),
                     "shown": sum(1 for r in tier if DEPTHS.index(r["shows_at"])
                                  <= DEPTHS.index(depth))}
    main = [r for r in bugs if r["depth"] == standard]
    return {
        "bugs": len({r["id"] for r in bugs}),
        "tiers": at,
        "missed": sorted(r["row"] for r in bugs if not caught(r, names)
                         and DEPTHS.index(r["shows_at"]) <= DEPTHS.index(r["depth"])),
        "failures": sorted(f"{r['row']}: {d}" for r in data["rows"] for d in names
                           if r["cells"][d]["cell"] in ("miss", "false", "error")),
        "caught_by_one_detector": sorted(r["id"] for r in main
                                         if len(caught(r, names)) == 1),
        "correct_entries": len({r["id"] for r in clean}),
        "false_alarms": sum(1 for r in clean for d in names
                            if r["cells"][d]["cell"] in ("false", "error")),
    }


def coverage(data):
    """What differs between the JSON's rows and columns and today's varlen zoo and detectors."""
    import detectors

    problems = []
    keys = ("kind", "id", "depth", "category", "expected", "shows_at", "conventions", "dtypes")
    have = {r["row"]: {k: r.get(k) for k in keys} for r in data["rows"]}
    want = {r["row"]: {k: r[k] for k in keys} for r in current_rows()}
    for label in sorted(want.keys() - have.keys()):
        problems.append(f"row {label} is in the varlen zoo but not in the JSON")
    for label in sorted(have.keys() - want.keys()):
        problems.append(f"row {label} is in the JSON but no longer in the varlen zoo")
    for label in sorted(want.keys() & have.keys()):
        if want[label] != have[label]:
            changed = [k for k in keys if want[label][k] != have[label][k]]
            problems.append(f"row {label}: {', '.join(changed)} changed since the JSON was written")
    names = [d.NAME for d in detectors.varlen_detectors()]
    if data["detectors"] != names:
        problems.append(f"varlen detectors differ: JSON {data['detectors']}, code {names}")
    oracles = {d.NAME: d.ORACLE for d in detectors.varlen_detectors()}
    if data.get("oracles") != oracles:
        problems.append("the varlen detectors' oracle kinds changed since the JSON was written")
    for r in data["rows"]:
        missing = [d for d in data["detectors"] if d not in r.get("cells", {})]
        if missing:
            problems.append(f"row {r['row']} has no cell for {', '.join(missing)}")
    if not problems and data.get("summary") != summary(data):
        problems.append("the summary is not what the cells give")
    return problems
