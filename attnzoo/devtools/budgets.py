"""``attnzoo bench --budgets``: the order a ``--budget`` run follows, and what each budget catches.

Two measurements, one after the other:

1. **The order** (``attnzoo/budget_order.json``). Per contract, each unit's time on the
   reference in attnzoo's worker (the median of ``repeats`` runs; a unit is one detector on the
   cases one tier adds) and the zoo rows it catches: at quick, the kill matrix's cells
   (``docs/kill-matrix.json``); at a deeper tier, the rows whose bug shows only there, run at
   it. The order is greedy: the unit with the most rows not yet caught per second first.
2. **The shares** (``docs/benchmark-budgets.json``). Every bug row of the zoo is checked with
   ``--depth standard --budget 30 --exitfirst``, without following or shrinking (so the run
   ends at the first failing case), once in the measured order and once in the suite's; a row
   counts as caught at a budget B when its flag came within B seconds of the check's start,
   the worker's start and the import included. The order does not depend on the budget, so a
   run with ``--budget B`` does the same up to B.
"""

import json
import statistics
import subprocess
import sys
import time

from attnzoo import budget
from attnzoo.devtools import bench
from attnzoo.devtools.bench import ROOT

BUDGETS = (2, 5, 10, 30)
DEPTH = "standard"  # the shares' depth: check's default
ORDER_PATH = budget.ORDER_FILE
SHARES_PATH = ROOT / "docs" / "benchmark-budgets.json"
MATRIX_PATH = ROOT / "docs" / "kill-matrix.json"
CAUGHT_CELLS = ("hit", "bonus", "crash")


def contract_of(row):
    return "sdpa" if row.backend == "sdpa" else "lesson"


def costs(contract, tiers, repeats):
    """``{tier: {detector: seconds}}`` on the contract's reference, in attnzoo's worker."""
    from attnzoo import checking
    from attnzoo.catalogue import REFERENCE_ROWS
    from attnzoo.options import Options
    from attnzoo.progress import Progress
    from attnzoo.runner import run
    from attnzoo.sandbox import session
    from detectors import all_detectors
    from detectors.kit.battery import Battery
    from detectors.kit.subject import Subject

    backend = "sdpa" if contract == "sdpa" else "numpy"
    locator = dict(REFERENCE_ROWS)[backend]
    options = Options.build(depth=tiers[-1], deadline=0, shrink=False, follow=False)
    times = {t: {d.NAME: [] for d in all_detectors()} for t in tiers}
    with open("/dev/null", "w") as quiet:
        executor = session.executor(options, Progress(quiet))
        try:
            target = checking.targets(executor, locator, options)[0]
            executor.use(target)
            for _ in range(repeats):
                for tier in tiers:
                    battery = Battery(0, depth=tier, start=tier)
                    for detector in all_detectors():
                        subject = Subject(target, executor, "float64")
                        times[tier][detector.NAME].append(run(detector, subject,
                                                              battery).seconds)
        finally:
            executor.close()
    return {t: {n: round(statistics.median(s), 4) for n, s in per.items()}
            for t, per in times.items()}


def catches(tiers, progress=None):
    """``{tier: {detector: [row labels]}}``: bug rows caught at the tier their bug shows at."""
    from attnzoo.matrix.model import evaluate, rows

    by_label = {r.label: r for r in rows(tiers[-1])}
    matrix = json.loads(MATRIX_PATH.read_text())
    out = {t: {} for t in tiers}
    for r in matrix["rows"]:
        row = by_label.get(r["row"])
        if row is None or row.kind != "bug" or row.depth != "quick":
            continue
        for name, cell in r["cells"].items():
            if cell["cell"] in CAUGHT_CELLS:
                out["quick"].setdefault(name, []).append(row.label)
    for tier in tiers[1:]:
        found = evaluate(0, depth=tier, progress=progress,
                         select=lambda row, t=tier: row.kind == "bug" and row.depth == t)
        for (label, name), finding in found.findings.items():
            if finding.caught:
                out[tier].setdefault(name, []).append(label)
    return out


def greedy(seconds, caught, rows):
    """The units (any sortable keys of ``seconds``), most rows of ``rows`` not yet caught per
    second first; those that catch none left after, quickest first."""
    left, order, todo = set(rows), [], dict(seconds)

    def worth(name):
        return len(left & set(caught.get(name, ()))) / max(todo[name], 1e-3)

    while todo:
        best = max(todo, key=lambda n: (worth(n), -todo[n]))
        if worth(best) == 0:
            order += sorted(todo, key=lambda n: (todo[n], n))
            break
        order.append(best)
        left -= set(caught.get(best, ()))
        del todo[best]
    return order


def measure_order(repeats=3, progress=print):
    """The document of ``budget_order.json``."""
    from attnzoo.matrix.model import rows
    from detectors.kit.depths import DEPTHS

    tiers = DEPTHS
    progress("catches: the kill matrix's quick cells, and the deeper rows at their tier")
    caught = catches(tiers, progress=lambda row: progress(f"  {row.label}"))
    contracts = {r.label: contract_of(r) for r in rows(tiers[-1])}
    doc = {"commit": _commit(), "machine": bench.machine(), "repeats": repeats, "order": {},
           "detectors": {}}
    for contract in ("sdpa", "lesson"):
        progress(f"costs: every detector on the {contract} reference, {repeats} runs")
        spent = costs(contract, tiers, repeats)
        seconds, rows_of, doc["detectors"][contract] = {}, {}, {}
        for tier in tiers:
            for name, took in spent[tier].items():
                labels = [lb for lb in caught[tier].get(name, ()) if contracts[lb] == contract]
                seconds[(name, tier)], rows_of[(name, tier)] = took, labels
            doc["detectors"][contract][tier] = {
                name: {"seconds": spent[tier][name], "rows": len(rows_of[(name, tier)])}
                for name in spent[tier]}
        every = {label for labels in rows_of.values() for label in labels}
        doc["order"][contract] = [list(unit) for unit in greedy(seconds, rows_of, every)]
    return doc


def check_row(row, order):
    """One budgeted, exit-first check of a zoo row: caught, seconds, the flagging detector."""
    from attnzoo.checking import run_check
    from attnzoo.options import Options
    from attnzoo.progress import Progress

    options = Options.build(depth=DEPTH, budget=BUDGETS[-1], exitfirst=True, shrink=False,
                            follow=False)
    saved = budget.load_order
    budget.load_order = lambda path=None: order  # this process's own module: the parent's
    try:
        with open("/dev/null", "w") as quiet:
            start = time.perf_counter()
            sections, _, document, code = run_check(row.locator, options,
                                                    progress=Progress(quiet))
            seconds = time.perf_counter() - start
    finally:
        budget.load_order = saved
    flagged = [f.detector for s in sections for f in s["findings"] if f.caught]
    return {"caught": code == 1, "seconds": round(seconds, 2),
            "first": flagged[0] if flagged else None}


def measure_shares(order, progress=print):
    """The document of ``docs/benchmark-budgets.json``."""
    from attnzoo.matrix.model import rows

    bug_rows = [r for r in rows(DEPTH) if r.kind == "bug"]
    out = []
    for n, row in enumerate(bug_rows, 1):
        progress(f"  [{n}/{len(bug_rows)}] {row.label}")
        ways = [("measured", order), ("suite", {})]
        if n % 2:  # each order goes first on every other row: neither gains from the other
            ways.reverse()
        result = {way: check_row(row, given) for way, given in ways}
        out.append({"row": row.label, "depth": row.depth, "measured": result["measured"],
                    "suite": result["suite"]})
    shares = {way: {str(b): sum(1 for r in out if r[way]["caught"] and r[way]["seconds"] <= b)
                    for b in BUDGETS} for way in ("measured", "suite")}
    return {"commit": _commit(), "machine": bench.machine(), "depth": DEPTH,
            "budget": BUDGETS[-1], "budgets": list(BUDGETS), "rows": len(out),
            "deeper_rows": sum(1 for r in out if r["depth"] != "quick"), "caught": shares,
            "results": out}


def main(repeats=3, output=None):
    """Measure and write both files; 0."""
    def say(line):
        print(line, file=sys.stderr, flush=True)

    order = measure_order(repeats, say)
    bench.write(order, ORDER_PATH)
    shares = measure_shares(order["order"], say)
    bench.write(shares, output or SHARES_PATH)
    print(render(shares))
    return 0


def render(doc):
    """The share table: rows caught within each budget, in the measured and the suite's order."""
    lines = ["| budget | caught, measured order | caught, suite order |", "|---|---|---|"]
    for b in doc["budgets"]:
        cells = [f"{doc['caught'][w][str(b)]} of {doc['rows']} "
                 f"({100 * doc['caught'][w][str(b)] / doc['rows']:.0f}%)"
                 for w in ("measured", "suite")]
        lines.append(f"| {b} s | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def _commit():
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or None
