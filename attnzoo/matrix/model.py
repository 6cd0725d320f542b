"""The kill matrix: every zoo row against every detector, rendered as text, markdown or JSON.

Rows are the reference, the bugs and the decoys, one per backend they provide; columns are the
detectors, grouped by oracle kind, then the two baseline suites. One symbol per cell.
"""

import json
from dataclasses import dataclass, field

from detectors import all_detectors, baseline_suites
from detectors.kit.battery import Battery
from attnzoo.sandbox.executor import InProcess
from attnzoo.runner import run
from detectors.kit.subject import Subject
from attnzoo.sandbox.target import Target
from detectors.kit.verdict import CAUGHT, CRASHED, ERROR, HUNG, NA

SYMBOLS = {
    "hit": ("●", "expected and caught"),
    "bonus": ("○", "caught, not listed in the entry's caught_by"),
    "crash": ("✕", "caught because the implementation crashed or hung"),
    "miss": ("!", "expected but survived (a failure)"),
    "false": ("✗", "a correct implementation was flagged (a failure)"),
    "pass": ("·", "survived"),
    "na": ("-", "not applicable"),
    "error": ("E", "the detector itself failed (a failure)"),
}
FAILURES = ("miss", "false", "error")
REFERENCE_ROWS = (
    ("numpy", "reference.lesson_numpy"),
    ("torch", "reference.lesson_torch"),
    ("sdpa", "reference.sdpa:scaled_dot_product_attention"),
)


@dataclass(frozen=True)
class Row:
    kind: str  # "reference", "bug" or "decoy"
    id: str
    backend: str  # numpy, torch or sdpa
    locator: str
    category: str = ""
    expected: tuple = ()  # detectors the bug's metadata expects to catch it at this depth
    depth: str = "quick"  # the shallowest tier at which the bug shows (its Bug.depth)

    @property
    def label(self):
        return f"{self.id}-{self.backend}"

    def target(self, device="cpu"):
        contract = "sdpa" if self.backend == "sdpa" else "lesson"
        backend = "numpy" if self.backend == "numpy" else "torch"
        return Target(f"{self.id}/{self.backend}", self.locator, contract, backend, device=device)


def rows(depth="quick"):
    """Reference rows, then bugs by category, then decoys, with what ``depth`` expects.

    A bug that shows only at a deeper tier than ``depth`` is expected to survive everything.
    """
    import zoo

    reached = lambda bug: zoo.DEPTHS.index(bug.depth) <= zoo.DEPTHS.index(depth)  # noqa: E731

    out = [Row("reference", "reference", b, loc) for b, loc in REFERENCE_ROWS]
    order = list(zoo.CATEGORIES)
    rank = lambda e: order.index(e.meta.category) if e.meta.category in order else len(order)  # noqa: E731
    for entry in sorted(zoo.BUGS, key=lambda e: (rank(e), e.id)):
        for backend in entry.backends:
            expected = tuple(entry.meta.caught_by) if reached(entry.meta) else ()
            out.append(Row("bug", entry.id, backend, entry.locator(backend), entry.meta.category,
                           expected, entry.meta.depth))
    for entry in zoo.DECOYS:
        for backend in entry.backends:
            out.append(Row("decoy", entry.id, backend, entry.locator(backend)))
    return out


def cell(row, detector, verdict, baseline=False):
    """The cell kind for a verdict on a row."""
    if verdict == ERROR:
        return "error"
    if verdict == NA:
        return "na"
    caught = verdict in CAUGHT
    if row.kind != "bug":
        return "false" if caught else "pass"
    if verdict in (CRASHED, HUNG):
        return "crash"
    expected = detector in row.expected
    if caught:
        return "hit" if expected else "bonus"
    return "miss" if expected and not baseline else "pass"


_SUBJECTS = {}


def subject_for(row, device="cpu", dtype="float64"):
    """An in-process subject for a row (the zoo is trusted code), on a new instance each time.

    A fresh instance per cell keeps every cell independent of which detectors ran before it
    on the same worker, so serial and parallel runs agree even for bugs that keep state.
    """
    key = (row, device, dtype)
    if key not in _SUBJECTS:
        target = row.target(device)
        _SUBJECTS[key] = Subject(target, InProcess(target), dtype)
    return _SUBJECTS[key].fresh()


@dataclass
class Matrix:
    seed: int
    detectors: list
    baselines: list
    rows: list
    findings: dict = field(default_factory=dict)  # (row label, detector) -> Finding

    def kind(self, row, detector):
        finding = self.findings.get((row.label, detector))
        if finding is None:
            return None
        return cell(row, detector, finding.verdict, detector in self.baselines)

    def failures(self):
        return [(r.label, d, self.findings[(r.label, d)].message)
                for r in self.rows for d in self.detectors + self.baselines
                if self.kind(r, d) in FAILURES]

    # -- summary ---------------------------------------------------------------------------

    def caught_by(self, row, names):
        return [d for d in names if (f := self.findings.get((row.label, d))) and f.caught]

    def summary(self):
        bug_rows = [r for r in self.rows if r.kind == "bug"]
        bugs = sorted({r.id for r in bug_rows})

        def suite(names):
            rows_caught = [r for r in bug_rows if self.caught_by(r, names)]
            ids = {r.id for r in rows_caught}
            return {"rows": len(rows_caught), "bugs": len(ids)}

        single = [r.label for r in bug_rows if len(self.caught_by(r, self.detectors)) == 1]
        correct = [r for r in self.rows if r.kind != "bug"]
        return {
            "seed": self.seed,
            "bug_rows": len(bug_rows),
            "bugs": len(bugs),
            "full_suite": suite(self.detectors),
            "baselines": {b: suite([b]) for b in self.baselines},
            "caught_by_one_detector": single,
            "correct_rows": len(correct),
            "false_alarms": sum(1 for r in correct for d in self.detectors + self.baselines
                                if self.kind(r, d) == "false"),
            "failures": len(self.failures()),
        }

    def to_json(self):
        return {
            "seed": self.seed,
            "detectors": self.detectors,
            "baselines": self.baselines,
            "symbols": {k: {"symbol": s, "meaning": m} for k, (s, m) in SYMBOLS.items()},
            "rows": [
                {
                    "row": r.label, "kind": r.kind, "id": r.id, "backend": r.backend,
                    "category": r.category, "expected": list(r.expected),
                    "cells": {
                        d: {"cell": self.kind(r, d), **self.findings[(r.label, d)].to_json()}
                        for d in self.detectors + self.baselines
                        if (r.label, d) in self.findings
                    },
                }
                for r in self.rows
            ],
            "summary": self.summary(),
        }

    # -- rendering -------------------------------------------------------------------------

    def columns(self):
        return [(str(i + 1), d) for i, d in enumerate(self.detectors)] + [
            (chr(ord("A") + i), b) for i, b in enumerate(self.baselines)
        ]

    def render_text(self):
        cols = self.columns()
        width = max(len(r.label) for r in self.rows) + 2
        head = " " * width + " ".join(f"{c:>2}" for c, _ in cols[: len(self.detectors)])
        head += "  | " + " ".join(f"{c:>2}" for c, _ in cols[len(self.detectors):])
        lines = ["kill matrix (rows: implementation-backend; columns: detectors)", head]
        kind_of_row = None
        for r in self.rows:
            if r.kind != kind_of_row:
                kind_of_row = r.kind
                lines.append(f"-- {r.kind} " + "-" * (len(head) - len(r.kind) - 4))
            marks = [SYMBOLS[self.kind(r, d) or "na"][0] for _, d in cols]
            line = f"{r.label:<{width}}" + " ".join(f"{m:>2}" for m in marks[: len(self.detectors)])
            line += "  | " + " ".join(f"{m:>2}" for m in marks[len(self.detectors):])
            lines.append(line)
        lines += ["", "legend: " + "   ".join(f"{s} {m}" for s, m in SYMBOLS.values())]
        lines.append("columns: " + ", ".join(f"{c} {d}" for c, d in cols))
        lines += self.summary_lines()
        return "\n".join(lines)

    def summary_lines(self):
        s = self.summary()
        full = s["full_suite"]
        out = [
            f"full suite: caught {full['rows']}/{s['bug_rows']} bug rows "
            f"({full['bugs']}/{s['bugs']} bugs)",
        ]
        for name, b in s["baselines"].items():
            out.append(f"baseline {name}: caught {b['rows']}/{s['bug_rows']} bug rows "
                       f"({b['bugs']}/{s['bugs']} bugs)")
        single = s["caught_by_one_detector"]
        out.append(f"caught by only one detector: {len(single)}"
                   + (f" ({', '.join(single)})" if single else ""))
        out.append(f"false alarms on {s['correct_rows']} correct rows: {s['false_alarms']}")
        out.append(f"failing cells: {s['failures']}")
        return out

    def render_markdown(self):
        cols = self.columns()
        lines = ["| row | " + " | ".join(c for c, _ in cols) + " |",
                 "|---|" + "---|" * len(cols)]
        for r in self.rows:
            marks = [SYMBOLS[self.kind(r, d) or "na"][0] for _, d in cols]
            lines.append(f"| {r.label} | " + " | ".join(marks) + " |")
        lines += ["", "Columns: " + ", ".join(f"**{c}** `{d}`" for c, d in cols), ""]
        lines.append("Legend: " + "; ".join(f"{s} {m}" for s, m in SYMBOLS.values()))
        lines += [""] + [f"- {line}" for line in self.summary_lines()]
        return "\n".join(lines)


def evaluate(seed=0, repeat=1, select=None, device="cpu", dtype="float64", progress=None,
             depth="quick"):
    """Run every detector and baseline on every row; ``select`` filters rows by label."""
    battery = Battery(seed, repeat, depth)
    dets, bases = all_detectors(), baseline_suites()
    chosen = [r for r in rows(depth) if select is None or select(r)]
    matrix = Matrix(seed, [d.NAME for d in dets], [b.NAME for b in bases], chosen)
    for row in chosen:
        for detector in dets + bases:
            subject = subject_for(row, device, dtype)
            matrix.findings[(row.label, detector.NAME)] = run(detector, subject, battery)
        if progress:
            progress(row)
    return matrix


def from_json(data):
    """Rebuild the cell kinds from a matrix JSON (for comparisons between runs)."""
    return {(r["row"], d): c["cell"] for r in data["rows"] for d, c in r["cells"].items()}


def dumps(matrix):
    return json.dumps(matrix.to_json(), indent=1, ensure_ascii=False)
