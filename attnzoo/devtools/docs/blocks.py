"""The generated blocks of ``docs/test-design.md``: the numbers of each kind of oracle.

The rest of that page is written by hand; each block sits between ``<!-- generated:NAME -->``
and ``<!-- /generated:NAME -->``.
"""

from attnzoo.devtools.docs.data import BLOCK, TEST_DESIGN
from attnzoo.devtools.docs.varlen_pages import block_categories as varlen_categories
from attnzoo.devtools.docs.varlen_pages import block_oracles as varlen_oracles
from attnzoo.devtools.docs.view import anchor


def oracle_stats(view):
    """Per oracle kind: detectors, bug rows and bugs caught, rows caught by no other kind."""
    groups = view.groups()
    kind_of = {d: k for k, ds in groups for d in ds}
    out = []
    for kind, names in groups:
        caught = [r for r in view.bug_rows if view.caught(r, names)]
        alone = [r for r in caught
                 if all(kind_of[d] == kind for d in view.caught(r, view.detectors))]
        crash_only = [r for r in caught
                      if all(view.kind(r, d) == "crash" for d in view.caught(r, names))]
        out.append({"kind": kind, "detectors": names, "rows": caught, "alone": alone,
                    "crash_only": crash_only, "bugs": sorted({r["id"] for r in caught})})
    return out


def link(entry_id):
    return f"[`{entry_id}`](catalogue/{entry_id}.md)"


def block_oracle_table(view):
    n_rows, n_bugs = len(view.bug_rows), len({r["id"] for r in view.bug_rows})
    depth = view.data.get("summary", {}).get("depth", "quick")
    lines = [f"Out of {n_rows} bug rows ({n_bugs} bugs) at seed {view.data.get('seed', 0)}, "
             f"depth {depth} (rows of bugs that show only deeper are counted, never caught). "
             "*Caught alone*: rows that no detector of any other kind catches. *By a crash "
             "only*: rows this kind catches only because the implementation raised or hung.", "",
             "| oracle kind | detectors | bug rows caught | bugs caught | caught alone "
             "| by a crash only |",
             "|---|---:|---:|---:|---:|---:|"]
    for s in oracle_stats(view):
        lines.append(f"| [{s['kind']}](#{anchor(s['kind'])}) | {len(s['detectors'])} | "
                     f"{len(s['rows'])} | {len(s['bugs'])} | {len(s['alone'])} | "
                     f"{len(s['crash_only'])} |")
    return lines


def suite_stats(view, names):
    rows = [r for r in view.bug_rows if view.caught(r, names)]
    correct = [r for r in view.rows if r["kind"] != "bug"]
    false = sum(1 for r in correct for d in names if view.kind(r, d) == "false")
    return len(rows), len({r["id"] for r in rows}), false


def block_suites(view):
    n_rows, n_bugs = len(view.bug_rows), len({r["id"] for r in view.bug_rows})
    n_correct = sum(1 for r in view.rows if r["kind"] != "bug")
    lines = [f"| suite | bug rows caught (of {n_rows}) | bugs caught (of {n_bugs}) | "
             f"false alarms on {n_correct} correct rows |", "|---|---:|---:|---:|"]
    suites = [(f"`{b}`", [b]) for b in view.baselines]
    suites.append(("both baselines together", list(view.baselines)))
    suites.append((f"the full suite ({len(view.detectors)} detectors)", list(view.detectors)))
    for label, names in suites:
        rows, bugs, false = suite_stats(view, names)
        lines.append(f"| {label} | {rows} | {bugs} | {false} |")
    missed = [r for r in view.bug_rows if not view.caught(r, view.baselines)]
    ids = sorted({r["id"] for r in missed})
    lines += ["", f"Bug rows that both baselines miss: {len(missed)} ({len(ids)} bugs): "
              + ", ".join(link(i) for i in ids) + "."]
    single = [r for r in view.bug_rows if len(view.caught(r, view.detectors)) == 1]
    if single:
        only = [f"{link(r['id'])} {r['backend']} (`{view.caught(r, view.detectors)[0]}`)"
                for r in single]
        lines += ["", f"Rows the full suite catches with one detector only ({len(single)}): "
                  + ", ".join(only) + "."]
    return lines


def block_categories(view):
    import zoo  # the zoo imports every entry and torch: only when pages are made

    groups = view.groups()
    cats = [c for c in zoo.CATEGORIES if any(r["category"] == c for r in view.bug_rows)]
    lines = ["Bug rows caught by at least one detector of each kind, per category "
             "(caught / rows in the category).", "",
             "| category | rows | " + " | ".join(k for k, _ in groups) + " |",
             "|---|---:|" + "---:|" * len(groups)]
    for c in cats:
        rows = [r for r in view.bug_rows if r["category"] == c]
        cells = []
        for _, names in groups:
            n = sum(1 for r in rows if view.caught(r, names))
            cells.append(str(n) if n else "·")
        lines.append(f"| {c} | {len(rows)} | " + " | ".join(cells) + " |")
    return lines


def block_oracle(view, kind):
    stats = {s["kind"]: s for s in oracle_stats(view)}
    s = stats.get(kind)
    if s is None:
        return ["No detector of this kind yet."]
    lines = ["| detector | property | bug rows caught | caught by it alone |",
             "|---|---|---:|---:|"]
    for d in s["detectors"]:
        rows = [r for r in view.bug_rows if d in view.caught(r, view.detectors)]
        alone = [r for r in rows if view.caught(r, view.detectors) == [d]]
        lines.append(f"| `{d}` | {view.prop(d)} | {len(rows)} | {len(alone)} |")
    lines.append("")
    if s["bugs"]:
        lines.append(f"Bugs it catches ({len(s['bugs'])}): "
                     + ", ".join(link(i) for i in s["bugs"]) + ".")
    if s["alone"]:
        lines += ["", "Caught by this kind of oracle alone: "
                  + ", ".join(f"{link(r['id'])} {r['backend']}" for r in s["alone"]) + "."]
    return lines


def render_blocks(text, view, varlen=None):
    """Fill every generated block of a hand-written page; unknown block names are an error.
    ``varlen`` (a ``VarlenView``) fills the ``varlen-*`` blocks."""
    def fill(m):
        name = m.group("name")
        if name.startswith("varlen-") and varlen is None:
            body = ["No varlen kill matrix yet: run `attnzoo docs`."]
        elif name == "varlen-oracles":
            body = varlen_oracles(varlen)
        elif name == "varlen-categories":
            body = varlen_categories(varlen)
        elif name == "oracle-table":
            body = block_oracle_table(view)
        elif name == "suites":
            body = block_suites(view)
        elif name == "categories":
            body = block_categories(view)
        elif name.startswith("oracle:"):
            body = block_oracle(view, name.split(":", 1)[1])
        else:
            raise ValueError(f"{TEST_DESIGN}: unknown generated block {name!r}")
        return m.group(1) + "\n".join(body) + "\n" + m.group(4)

    return BLOCK.sub(fill, text)


