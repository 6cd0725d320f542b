"""The varlen contract's pages: one per varlen bug, its section of the catalogue's index, and
its blocks of ``docs/test-design.md``, all from ``docs/kill-matrix-varlen.json`` and the zoo."""

import inspect
import textwrap

from attnzoo.devtools.docs.data import STAMP
from attnzoo.devtools.docs.varlen_data import JSON_PATH, caught
from attnzoo.devtools.docs.view import anchor, code, fence, legend_line, rel, story, symbol
from attnzoo.diff import method_diffs
from attnzoo.vocabulary import CAUGHT_CELLS

SECTION = "The varlen contract"


class VarlenView:
    """The varlen JSON indexed the way the pages read it; the detectors' fields from the code."""

    def __init__(self, data):
        import detectors

        self.data = data
        self.detectors = list(data["detectors"])
        self.standard = data["caught_by_depth"]
        self.info = {d.NAME: d for d in detectors.varlen_detectors()}
        self.bug_rows = [r for r in data["rows"] if r["kind"] == "bug"]
        self.main = [r for r in self.bug_rows if r["depth"] == self.standard]

    def rows_of(self, entry_id):
        return [r for r in self.data["rows"] if r["id"] == entry_id]

    def oracle(self, name):
        return self.data["oracles"].get(name, "?")

    def prop(self, name):
        return getattr(self.info.get(name), "PROPERTY", "").rstrip(".")

    def groups(self):
        """(oracle kind, [detectors]) in the order kinds first appear among the detectors."""
        out = {}
        for d in self.detectors:
            out.setdefault(self.oracle(d), []).append(d)
        return list(out.items())


def oracle_link(kind):
    return f"[{kind}](../test-design.md#{anchor(kind)})"


def bug_page(entry, view):
    import zoo.varlen as varlen_zoo

    meta = entry.meta
    rows = view.rows_of(meta.id)
    src = rel(entry.path)
    n = len(view.detectors)
    lines = [STAMP.format(sources=f"{src} and {JSON_PATH.as_posix()}"), "",
             f"# {meta.title}", "",
             f"`{meta.id}` · [varlen contract](README.md#{anchor(SECTION)}) · {meta.category} · "
             f"{meta.symptom} · [{src}](../../{src})", "",
             f"> **Lesson.** {meta.lesson}", "",
             "| | |", "|---|---|",
             "| contract | varlen: packed, paged attention with flash-attention's `attn_varlen` "
             "signature ([varlen.md](../varlen.md)) |",
             f"| category | **{meta.category}**: {varlen_zoo.CATEGORIES.get(meta.category, '')} |",
             f"| symptom | **{meta.symptom}** |",
             f"| seen in | {meta.seen_in} |",
             f"| expected to be caught by | {', '.join(f'`{d}`' for d in meta.caught_by)} "
             f"(checked at depth {view.standard}) |",
             f"| shows at depth | **{meta.depth}**: the shallowest tier at which a detector "
             "catches it |"]
    if rows:
        counts = " · ".join(f"at {r['depth']}: {len(caught(r, view.detectors))} of {n} "
                            "detectors" for r in rows)
        lines.append(f"| caught by | {counts} (seed {view.data['seed']}, "
                     f"{' and '.join(rows[0]['dtypes'])}) |")
    text = story(entry)
    if text:
        lines += ["", "## What goes wrong", "", text]
    lines += ["", "## The buggy lines", "",
              "Each varlen bug is one of the contract's correct kernels (zoo/varlen/decoys/) "
              "with one method or attribute replaced; the diff is against what it replaces.", ""]
    lines += buggy_lines(entry)
    if not rows:
        lines += [f"Not in `{JSON_PATH.as_posix()}` yet: run `attnzoo docs`."]
        return "\n".join(lines).rstrip() + "\n"
    lines += ["## Verdicts", "",
              "| detector | oracle | " + " | ".join(r["depth"] for r in rows) + " |",
              "|---|---|" + "---|" * len(rows)]
    for d in view.detectors:
        marks = [symbol(r["cells"][d]["cell"]) for r in rows]
        lines.append(f"| `{d}` | {oracle_link(view.oracle(d))} | " + " | ".join(marks) + " |")
    lines += ["", legend_line(), "", "## Who catches it", ""]
    names = [d for d in view.detectors if any(r["cells"][d]["cell"] in CAUGHT_CELLS
                                              for r in rows)]
    for d in names:
        first = next(r for r in rows if r["cells"][d]["cell"] in CAUGHT_CELLS)
        listed = "listed in `caught_by`" if d in meta.caught_by else "not in `caught_by`"
        lines.append(f"- **`{d}`** ({view.oracle(d)} oracle; {listed}), from depth "
                     f"{first['depth']}: {code(first['cells'][d]['message'])}")
    if not names:
        lines.append(f"No varlen detector catches it at {' or '.join(r['depth'] for r in rows)}.")
    lines += ["", "## Who does not, and why", ""]
    misses = [d for d in view.detectors if d not in names]
    if not misses:
        lines.append("Every varlen detector catches it.")
    for d in misses:
        lines.append(f"- **`{d}`** ({view.oracle(d)}): {why_not(view, rows, d)}")
    return "\n".join(lines).rstrip() + "\n"


def buggy_lines(entry):
    import zoo.varlen as varlen_zoo

    impl = varlen_zoo.implementation(entry)
    diffs = method_diffs(impl)
    if diffs:
        out = []
        for label, diff in diffs:
            out += [f"`{label}`", "", fence(diff, "diff"), ""]
        return out
    cls = type(impl)
    source = textwrap.dedent(inspect.getsource(cls))
    base = cls.__mro__[1]
    return [f"`{cls.__name__}` replaces no method of `{base.__name__}` "
            f"({rel(inspect.getsourcefile(base))}); it changes a class attribute:", "",
            fence(source, "python"), ""]


def why_not(view, rows, name):
    """Its n/a reason at a tier, a failure of the detector, or the property still held."""
    for r in rows:
        c = r["cells"][name]
        if c["cell"] == "na":
            return f"n/a at {r['depth']}: {c['message']}"
        if c["cell"] in ("error", "miss"):
            return f"{c['cell']} at {r['depth']}: {c['message'] or 'survived'}"
    return f"survived: this kernel still satisfies ‘{view.prop(name)}’"


def index_section(view):
    """The catalogue index's section on the varlen contract."""
    import zoo.varlen as varlen_zoo

    s, n = view.data["summary"], len(view.detectors)
    tiers = s["tiers"]
    lines = [f"## {SECTION}", "",
             "Packed, paged attention with flash-attention's `attn_varlen` signature: its "
             "contract, conventions and detectors are in [varlen.md](../varlen.md). Its kill "
             f"matrix as data: [`{JSON_PATH.name}`](../{JSON_PATH.name}) (seed "
             f"{view.data['seed']}, each entry under the conventions it declares); each line: "
             f"title, symptom, and how many of the {n} varlen detectors catch it at each tier.",
             ""]
    for depth, t in tiers.items():
        deeper = t["bugs"] - t["shown"]
        lines.append(f"- at depth {depth}: the varlen detectors catch {t['caught']} of "
                     f"{t['bugs']} bugs" + (f"; {deeper} show only deeper." if deeper else "."))
    lines.append(f"- {len(s['caught_by_one_detector'])} bugs are caught by one detector only "
                 f"at {view.standard}; the reference and decoys ({s['correct_entries']} "
                 f"entries, at {' and '.join(tiers)}, in {', '.join(rows_dtypes(view))}) "
                 f"raise {s['false_alarms']} false alarms.")
    if s["missed"] or s["failures"]:
        lines.append(f"- missed where they show: {', '.join(s['missed']) or 'none'}; cells "
                     f"that fail their expectation: {', '.join(s['failures']) or 'none'}.")
    lines.append("")
    for category, description in varlen_zoo.CATEGORIES.items():
        entries = [e for e in varlen_zoo.BUGS if e.meta.category == category]
        if not entries:
            continue
        lines += [f"### varlen: {category}", "", f"*{description}*", ""]
        for e in entries:
            counts = ", ".join(f"{r['depth']} {len(caught(r, view.detectors))}/{n}"
                               for r in view.rows_of(e.id)) or "not in the JSON yet"
            lines.append(f"- [`{e.id}`]({e.id}.md) — {e.meta.title}. *{e.meta.symptom}*; "
                         f"detectors that catch it: {counts}")
        lines.append("")
    lines += ["### varlen: decoys and the reference", "",
              "Correct kernels written nothing like the reference; every varlen detector must "
              "pass them under the conventions they declare.", ""]
    for entry_id, title, path in [("reference", "The varlen reference, a loop over sequences "
                                   "in float64", "reference/varlen.py")] + \
            [(e.id, e.meta.title, rel(e.path)) for e in varlen_zoo.DECOYS]:
        rows = view.rows_of(entry_id)
        flagged = sum(1 for r in rows for d in view.detectors
                      if r["cells"][d]["cell"] in ("false", "error"))
        declared = rows[0]["conventions"] if rows else {}
        conv = ("; declares " + ", ".join(f"{k} = {v}" for k, v in declared.items())
                if declared else "")
        tiers_run = " and ".join(r["depth"] for r in rows) or "not in the JSON yet"
        lines.append(f"- `{entry_id}` ([{path}](../../{path})) — {title}{conv}. "
                     f"False alarms at {tiers_run}: {flagged}")
    return lines


def rows_dtypes(view):
    clean = [r for r in view.data["rows"] if r["kind"] != "bug"]
    return clean[0]["dtypes"] if clean else []


def block_oracles(view):
    """Per oracle kind: its varlen detectors, the bugs they catch at the caught_by tier, the
    bugs no other kind catches."""
    groups = view.groups()
    kind_of = {d: k for k, ds in groups for d in ds}
    total = len(view.main)
    lines = [f"Out of {total} varlen bugs at seed {view.data['seed']}, depth {view.standard}, "
             "each under its declared conventions. *Caught alone*: bugs no varlen detector of "
             "any other kind catches.", "",
             "| oracle kind | varlen detectors | bugs caught | caught alone | bugs it catches |",
             "|---|---|---:|---:|---|"]
    for kind, names in groups:
        rows = [r for r in view.main if caught(r, names)]
        alone = [r for r in rows if all(kind_of[d] == kind for d in caught(r, view.detectors))]
        ids = ", ".join(f"[`{r['id']}`](catalogue/{r['id']}.md)"
                        + (" (alone)" if r in alone else "") for r in rows)
        lines.append(f"| [{kind}](#{anchor(kind)}) | {', '.join(f'`{d}`' for d in names)} | "
                     f"{len(rows)} | {len(alone)} | {ids or '·'} |")
    return lines


def block_categories(view):
    import zoo.varlen as varlen_zoo

    groups = view.groups()
    lines = [f"Varlen bugs caught at {view.standard} by at least one detector of each kind, "
             "per category (caught / bugs in the category).", "",
             "| category | bugs | " + " | ".join(k for k, _ in groups) + " |",
             "|---|---:|" + "---:|" * len(groups)]
    for c in varlen_zoo.CATEGORIES:
        rows = [r for r in view.main if r["category"] == c]
        if not rows:
            continue
        cells = [str(sum(1 for r in rows if caught(r, names)) or "·") for _, names in groups]
        lines.append(f"| {c} | {len(rows)} | " + " | ".join(cells) + " |")
    return lines
