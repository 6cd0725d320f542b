"""The JSON indexed the way the pages read it, and the small pieces of markdown they share."""

import importlib
import inspect
import re
from pathlib import Path

from attnzoo.devtools.docs.data import ROOT
from attnzoo.vocabulary import CAUGHT_CELLS, glyph, legend
from detectors import by_name


def code(text):
    """An inline code span that survives backticks in the text."""
    text = " ".join(str(text).split())
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text, lang=""):
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def anchor(text):
    """GitHub's heading anchor."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def sentence(text):
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def rel(path):
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def story(entry):
    """The entry's module docstring without its first line (the title is in the metadata)."""
    doc = inspect.cleandoc(importlib.import_module(entry.module).__doc__ or "")
    lines = doc.splitlines()
    return "\n".join(lines[1:]).strip() if lines else ""


def detector_info():
    return {n: {"oracle": d.ORACLE, "property": d.PROPERTY, "clauses": tuple(d.CLAUSES)}
            for n, d in by_name().items()}


class View:
    """The JSON, indexed the way the pages read it."""

    def __init__(self, data):
        self.data = data
        self.detectors = list(data["detectors"])
        self.baselines = list(data["baselines"])
        self.rows = data["rows"]
        self.info = detector_info()
        self.bug_rows = [r for r in self.rows if r["kind"] == "bug"]

    def rows_of(self, entry_id):
        return [r for r in self.rows if r["id"] == entry_id]

    def oracle(self, name):
        return self.info.get(name, {}).get("oracle", "?")

    def prop(self, name):
        return self.info.get(name, {}).get("property", "")

    @staticmethod
    def kind(row, name):
        c = row["cells"].get(name)
        return c["cell"] if c else None

    def caught(self, row, names):
        return [d for d in names if self.kind(row, d) in CAUGHT_CELLS]

    def specificity(self, name):
        """How many bug rows a detector catches: the fewer, the more specific."""
        return sum(1 for r in self.bug_rows if self.kind(r, name) in CAUGHT_CELLS)

    def groups(self):
        """Detectors grouped by oracle kind, in the matrix's column order."""
        out = []
        for d in self.detectors:
            kind = self.oracle(d)
            if out and out[-1][0] == kind:
                out[-1][1].append(d)
            else:
                out.append((kind, [d]))
        return out


def smallest(view, row):
    """(detector, cell) with the shortest reproduction among the suite's detectors that catch
    the row; ties go to the differential oracle, then to the most specific detector."""
    candidates = []
    for d in view.caught(row, view.detectors):
        cell = row["cells"][d]
        snippet = (cell.get("evidence") or {}).get("snippet") or ""
        if not snippet:
            continue
        differential = 0 if view.oracle(d) == "differential" else 1
        candidates.append(((len(snippet), differential, view.specificity(d), d), d, cell))
    if not candidates:
        return None, None, 0
    candidates.sort(key=lambda c: c[0])
    return candidates[0][1], candidates[0][2], len(candidates)


def why_not(view, meta, row, name):
    """Why a detector that does not catch a row does not: its n/a reason, the entry's gap, or
    the property the implementation still satisfies."""
    cell = row["cells"].get(name)
    if cell is None:
        return "no verdict in docs/kill-matrix.json (run `attnzoo docs`)"
    if cell["cell"] == "na":
        return "n/a: " + na_reason(cell)
    if cell["cell"] == "error":
        return "the detector failed: " + cell["message"]
    gaps = getattr(meta, "gaps", {}) or {}
    if name in gaps:
        return f"survived: {gaps[name]}"
    prop = view.prop(name).rstrip(".")
    return f"survived: this implementation still satisfies ‘{prop}’"


def na_reason(cell):
    return re.sub(r"^\[[^\]]*\]\s*n/a:\s*", "", cell["message"])


def symbol(kind):
    """A cell's glyph; a blank where the JSON has no cell."""
    return glyph(kind) if kind else " "




def verdict_table(view, rows, names, link_oracle=True):
    backends = [r["backend"] for r in rows]
    lines = ["| detector | oracle | " + " | ".join(backends) + " |",
             "|---|---|" + "---|" * len(backends)]
    for d in names:
        oracle = view.oracle(d)
        o = f"[{oracle}](../test-design.md#{anchor(oracle)})" if link_oracle else oracle
        marks = [symbol(view.kind(r, d)) for r in rows]
        lines.append(f"| `{d}` | {o} | " + " | ".join(marks) + " |")
    return lines


def legend_line():
    return "Legend: " + legend(" · ") + "."


def group_by_reason(items):
    """[(name, backend, reason)] -> [(name, reason, [backends])], first-seen order."""
    out = {}
    for name, backend, reason in items:
        out.setdefault((name, reason), []).append(backend)
    return [(n, r, b) for (n, r), b in out.items()]

