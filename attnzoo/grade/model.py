"""The grade of a test suite: its tests against the reference, every decoy and every zoo bug.

A bug row is *caught* when at least one test fails or errors on it (an assertion, an exception,
a hang, a dead process); a test that fails on the reference or a decoy is a *false alarm*; a test
skipped on an implementation (it needs a function that implementation lacks, or the other
contract's fixture) is not counted there. The JSON form (``attnzoo grade --json``) is built here;
``attnzoo/grade/render.py`` prints it.
"""

import itertools
from concurrent.futures import ThreadPoolExecutor

from attnzoo.grade import canary
from attnzoo.grade import run as runner
from attnzoo.inert import inert

SCHEMA = "attnzoo.grade/1"
GLYPHS = {  # the kill matrix's symbols, read for tests instead of detectors
    "hit": ("●", "caught: the test failed an assertion"),
    "crash": ("✕", "caught: the test raised, hung or its process died"),
    "false": ("✗", "a correct implementation failed the test (a false alarm)"),
    "pass": ("·", "survived: the test passed"),
    "na": ("-", "skipped: the test does not apply to this implementation"),
}


def implementations(contracts, backend):
    """The matrix rows to grade: reference, bugs by category, decoys, of the contracts asked
    (the varlen contract's after the others: its reference, zoo/varlen's bugs and decoys)."""
    from attnzoo.matrix.model import rows

    wanted = {"sdpa" if c == "sdpa" else backend for c in contracts if c != "varlen"}
    return [r for r in rows() if r.backend in wanted] + (
        varlen_rows() if "varlen" in contracts else [])


def varlen_rows():
    """The varlen contract's rows, as the matrix's are made (backend "varlen"). A decoy that
    declares another convention (HF's window counting, FA2's LSE) is correct only under it: a
    suite testing the contract rightly fails it, so it is no row."""
    import zoo.varlen
    from attnzoo.matrix.model import Row

    return [Row("reference", "reference", "varlen", "reference.varlen:attn_varlen")] + [
        Row("bug", e.id, "varlen", f"{e.module}:{zoo.varlen.ATTRIBUTE}", e.meta.category)
        for e in zoo.varlen.BUGS] + [
        Row("decoy", e.id, "varlen", f"{e.module}:{zoo.varlen.ATTRIBUTE}")
        for e in zoo.varlen.DECOYS if not zoo.varlen.conventions(e)]


def contract_of(fixtures):
    """The contract a test is graded under, by the fixture it takes."""
    return "varlen" if "varlen" in fixtures else "sdpa" if "sdpa" in fixtures else "lesson"


def row_contract(backend):
    return backend if backend in ("sdpa", "varlen") else "lesson"


def cell(row, outcome):
    if outcome is None or outcome.outcome == "skipped":
        return "na"
    if row.kind != "bug":
        return "false" if outcome.caught else "pass"
    if not outcome.caught:
        return "pass"
    return "hit" if outcome.assertion else "crash"


def grade(suite, backend="numpy", jobs=2, test_seconds=runner.TEST_SECONDS, progress=None,
          select=None, shown_as=None, isolation=None):
    """Collect the suite, run it on every row in a pool of processes; the grade as a dict.

    ``select`` keeps only the rows it accepts (tests grade against a few); ``shown_as`` is the
    path as the user wrote it, for the report; ``progress(label, done, total)`` is told of each
    run (a row, or a canary) as it finishes; each implementation's worker is confined to
    ``isolation`` (:class:`attnzoo.sandbox.confine.Isolation`; None: not confined).
    """
    collected = runner.collect(suite, isolation)
    tests = {t: f for t, f in collected.items() if f}
    if not tests:
        raise runner.SuiteError(
            f"{inert(suite.path)}: no test uses the `attention`, `sdpa` or `varlen` fixture"
            + (f" ({len(collected)} tests collected)" if collected else "")
            + ": take the implementation under test as a fixture argument")
    contracts = sorted({contract_of(f) for f in tests.values()})
    rows = [r for r in implementations(contracts, backend) if select is None or select(r)]
    runs = [(r, False) for r in rows] + [(r, True) for r in canary.chosen(rows)]
    finished = itertools.count(1)  # next() is atomic under the GIL: rows finish in threads

    def one(run):
        row, dressed = run
        spec = {"locator": row.locator, "contract": row_contract(row.backend),
                "backend": row.backend, "canary": dressed}
        outcomes = runner.run(suite, spec, list(tests), test_seconds, isolation)
        if progress:
            progress(f"canary-{row.label}" if dressed else row.label, next(finished), len(runs))
        return row, outcomes

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(one, runs))
    finally:
        runner.settle()  # every implementation's worker gone before the grade is
    return build(shown_as or str(suite.path), backend, tests, results[:len(rows)],
                 results[len(rows):])


def build(path, backend, tests, results, canaries=()):
    """The grade document from the outcomes of every (row, test), and of the canaries
    (:mod:`attnzoo.grade.canary`): a test failing on one is a false alarm. Test ids and fixture
    names come from the suite's own process: the document holds them inert."""
    import zoo
    import zoo.varlen

    tests = {inert(t): tuple(inert(f) for f in fixtures) for t, fixtures in tests.items()}
    results = [(row, {inert(t): o for t, o in outcomes.items()}) for row, outcomes in results]
    canaries = [(row, {inert(t): o for t, o in outcomes.items()}) for row, outcomes in canaries]
    names = list(tests)
    meta = {e.id: e.meta for e in zoo.BUGS + zoo.varlen.BUGS}
    doc_rows, false_alarms = [], []
    for row, outcomes in results:
        cells = {t: cell(row, outcomes.get(t)) for t in names}
        doc_rows.append({
            "row": row.label, "kind": row.kind, "id": row.id, "backend": row.backend,
            "category": row.category,
            "cells": {t: {"cell": cells[t], **outcomes[t].to_json()} for t in names},
        })
        for t in names:
            if cells[t] == "false":
                false_alarms.append({"test": t, "implementation": row.label,
                                     **outcomes[t].to_json()})
    for row, outcomes in canaries:  # the reference dressed as the bug: correct, so never caught
        for t in names:
            if outcomes.get(t) is not None and outcomes[t].outcome != "skipped" \
                    and outcomes[t].caught:
                false_alarms.append({"test": t, "implementation": f"canary-{row.label}",
                                     "canary": row.id, **outcomes[t].to_json()})
    bug_rows = [r for r in doc_rows if r["kind"] == "bug"]
    catches = {t: sorted({r["id"] for r in bug_rows if r["cells"][t]["cell"] in ("hit", "crash")})
               for t in names}
    bugs = {}
    for r in bug_rows:
        b = bugs.setdefault(r["id"], {"id": r["id"], "category": r["category"],
                                      "lesson": meta[r["id"]].lesson, "rows": [],
                                      "caught_by": set()})
        b["rows"].append(r["row"])
        b["caught_by"] |= {t for t in names if r["cells"][t]["cell"] in ("hit", "crash")}
    for b in bugs.values():
        b["caught_by"] = [t for t in names if t in b["caught_by"]]
        b["caught"] = bool(b["caught_by"])
    per_test = {t: {"fixtures": list(tests[t]), "catches": catches[t],
                    "only": [b for b in catches[t] if bugs[b]["caught_by"] == [t]],
                    "false_alarms": sum(1 for f in false_alarms if f["test"] == t),
                    "skipped_on": sum(1 for r in doc_rows if r["cells"][t]["cell"] == "na")}
                for t in names}
    caught = sum(1 for b in bugs.values() if b["caught"])
    return {
        "schema": SCHEMA,
        "command": "grade",
        "path": inert(path),
        "backend": backend,
        "contracts": sorted({row_contract(r["backend"]) for r in doc_rows}),
        "glyphs": {k: {"symbol": s, "meaning": m} for k, (s, m) in GLYPHS.items()},
        "tests": per_test,
        "false_alarms": false_alarms,
        "rows": doc_rows,
        "bugs": list(bugs.values()),
        "summary": {"tests": len(names), "implementations": len(doc_rows),
                    "bugs": len(bugs), "caught": caught,
                    "bug_rows": len(bug_rows),
                    "caught_rows": sum(1 for r in bug_rows if any(
                        c["cell"] in ("hit", "crash") for c in r["cells"].values())),
                    "false_alarms": len(false_alarms),
                    "canaries": len(canaries),
                    "canaries_failed": len({f["implementation"] for f in false_alarms
                                            if f.get("canary")})},
    }


def hide(doc):
    """The grade a learner sees: surviving bugs lose their id, row label and locator."""
    survivors = [b for b in doc["bugs"] if not b["caught"]]
    alias = {b["id"]: f"survivor-{i + 1}" for i, b in enumerate(survivors)}
    out = dict(doc, bugs=[], rows=[])
    for b in doc["bugs"]:
        if b["id"] in alias:
            b = dict(b, id=alias[b["id"]],
                     rows=[f"{alias[b['id']]}-{r.rsplit('-', 1)[1]}" for r in b["rows"]])
        out["bugs"].append(b)
    hidden = []
    for r in doc["rows"]:
        if r["id"] in alias:
            hidden.append(dict(r, id=alias[r["id"]], row=f"{alias[r['id']]}-{r['backend']}"))
        else:
            out["rows"].append(r)
    out["false_alarms"] = [dict(a, implementation=f"canary-{alias[a['canary']]}",
                                canary=alias[a["canary"]]) if a.get("canary") in alias else a
                           for a in doc["false_alarms"]]
    for r in hidden:  # at the end of their category: the sort order must not hint at the name
        last = max((i for i, o in enumerate(out["rows"])
                    if o["kind"] == "bug" and o["category"] == r["category"]), default=None)
        if last is None:
            last = max(i for i, o in enumerate(out["rows"]) if o["kind"] != "decoy"
                       and (o["kind"] == "reference" or o["category"] in _before(r, doc)))
        out["rows"].insert(last + 1, r)
    return out


def _before(row, doc):
    """The categories that come before this row's in the document."""
    order = list(dict.fromkeys(r["category"] for r in doc["rows"] if r["kind"] == "bug"))
    return order[:order.index(row["category"]) + 1]


def exit_code(doc, min_caught=0):
    s = doc["summary"]
    return 0 if s["false_alarms"] == 0 and s["caught"] >= min_caught else 1
