"""The catalogue's pages: one per bug, one per decoy, and the index."""

from attnzoo import catalogue
from attnzoo.devtools.docs.data import JSON_PATH, LONG, STAMP
from attnzoo.devtools.docs.varlen_data import JSON_PATH as VARLEN_JSON
from attnzoo.devtools.docs.view import (
    anchor,
    code,
    fence,
    group_by_reason,
    legend_line,
    na_reason,
    rel,
    sentence,
    smallest,
    story,
    symbol,
    verdict_table,
    why_not,
)
from attnzoo.diff import method_diffs
from attnzoo.vocabulary import CAUGHT_CELLS, CELLS

FALSE_ALARM = CELLS["false"].glyph


def bug_page(entry, view):
    import zoo  # the zoo imports every entry and torch: only when pages are made

    meta = entry.meta
    rows = view.rows_of(meta.id)
    src = rel(entry.path)
    lines = [STAMP.format(sources=f"{src} and {JSON_PATH.as_posix()}"), "",
             f"# {meta.title}", ""]
    lines.append(f"`{meta.id}` · [{meta.category}](README.md#{anchor(meta.category)}) · "
                 f"{meta.symptom} · {', '.join(entry.backends)} · [{src}](../../{src})")
    lines += ["", f"> **Lesson.** {meta.lesson}"]
    if meta.source:
        lines += [">", f"> Source: {meta.source}"]
    lines += ["", "| | |", "|---|---|",
              f"| category | **{meta.category}**: {zoo.CATEGORIES.get(meta.category, '')} |",
              f"| symptom | **{meta.symptom}**: {zoo.SYMPTOMS.get(meta.symptom, '')} |",
              f"| seen in | {meta.seen_in} |",
              f"| backends | {', '.join(entry.backends)} |",
              f"| expected to be caught by | {', '.join(f'`{d}`' for d in meta.caught_by)} |"]
    depth = getattr(meta, "depth", "quick")
    if depth != "quick":  # the JSON below is the quick tier, which such a bug survives
        lines.append(f"| shows at depth | **{depth}**: survives every detector at the shallower "
                     f"tiers; `attnzoo matrix --depth {depth} --only {meta.id}` catches it |")
    if rows:
        counts = " · ".join(f"{r['backend']}: {len(view.caught(r, view.detectors))} of "
                            f"{len(view.detectors)} detectors" for r in rows)
        lines.append(f"| caught by | {counts} |")
    text = story(entry)
    if text:
        lines += ["", "## What goes wrong", "", text]
    lines += ["", "## The buggy lines", "",
              "Each implementation subclasses the reference and replaces one method; the diff "
              "is against the method it replaces.", ""]
    for backend in entry.backends:
        for label, diff in method_diffs(entry.implementation(backend)) or [("", "")]:
            if not diff:
                lines += [f"**{backend}**: written from scratch (no reference method to diff "
                          "against).", ""]
                continue
            lines += [f"**{backend}** `{label}`", "", fence(diff, "diff"), ""]
    lines += ["## Smallest failing input", ""]
    if not rows:
        lines += [f"Not in `{JSON_PATH.as_posix()}` yet: run `attnzoo docs`.", ""]
    for r in rows:
        det, cell, n = smallest(view, r)
        if det is None:
            lines += [f"**{r['backend']}**: no detector left a reproduction.", ""]
            continue
        why = ("the only detector that catches this row" if n == 1 else
               f"the shortest reproduction among the {n} detectors that catch this row (each "
               "stops at its smallest failing case)")
        snippet = cell["evidence"]["snippet"]
        case = cell["evidence"].get("case") or ""
        case = f" Case `{case}`." if case else ""
        lines += [f"**{r['backend']}**, from `{det}` ({view.oracle(det)} oracle): {why}.{case}",
                  "", code(cell["message"]), ""]
        if snippet.count("\n") > LONG:
            lines += ["<details><summary>the reproduction "
                      f"({snippet.count(chr(10)) + 1} lines)</summary>", "",
                      fence(snippet, "python"), "", "</details>", ""]
        else:
            lines += [fence(snippet, "python"), ""]
    if rows:
        lines += ["## Verdicts", ""]
        lines += verdict_table(view, rows, view.detectors + view.baselines)
        lines += ["", legend_line(), "", "## Who catches it", ""]
        names = [d for d in view.detectors
                 if any(view.kind(r, d) in CAUGHT_CELLS for r in rows)]
        if not names:
            at = view.data.get("summary", {}).get("depth", "quick")
            lines += [f"No detector of the suite catches it at {at}"
                      + (f": it shows at {meta.depth} (above)."
                         if getattr(meta, "depth", at) != at else "."),
                      ""]
        for d in names:
            listed = "listed in `caught_by`" if d in meta.caught_by else "not in `caught_by`"
            lines.append(f"- **`{d}`** ({view.oracle(d)} oracle; {listed})")
            for r in rows:
                k = view.kind(r, d)
                what = (code(r["cells"][d]["message"]) if k in CAUGHT_CELLS
                        else why_not(view, meta, r, d))
                lines.append(f"  - {r['backend']} {symbol(k)}: {what}")
        lines += ["", "## Who does not, and why", ""]
        misses = [(d, r["backend"], why_not(view, meta, r, d))
                  for d in view.detectors if d not in names for r in rows]
        if not misses:
            lines += ["Every detector catches it on every backend.", ""]
        for d, reason, backends in group_by_reason(misses):
            lines.append(f"- **`{d}`** ({view.oracle(d)}) on {', '.join(backends)}: {reason}")
        lines += ["", "## The typical test suites", "",
                  "The two baselines are the tests most projects and courses write; they are "
                  "kept out of the suite's counts.", ""]
        for b in view.baselines:
            for r in rows:
                k = view.kind(r, b)
                what = (code(r["cells"][b]["message"]) if k in CAUGHT_CELLS
                        else why_not(view, meta, r, b))
                lines.append(f"- **`{b}`** on {r['backend']} {symbol(k)}: {what}")
    return "\n".join(lines).rstrip() + "\n"


def decoy_page(entry, view):
    meta = entry.meta
    rows = view.rows_of(meta.id)
    src = rel(entry.path)
    lines = [STAMP.format(sources=f"{src} and {JSON_PATH.as_posix()}"), "",
             f"# {meta.title}", "",
             f"`{meta.id}` · [decoy](README.md#decoys-correct-implementations) · "
             f"{', '.join(entry.backends)} · [{src}](../../{src})", "",
             f"**Technique.** {sentence(meta.technique)}", "",
             f"**Why it is correct.** {sentence(meta.why_correct)}", ""]
    text = story(entry)
    if text:
        lines += ["## How it works", "", text, ""]
    lines += ["## Verdicts", ""]
    if not rows:
        lines += [f"Not in `{JSON_PATH.as_posix()}` yet: run `attnzoo docs`."]
        return "\n".join(lines).rstrip() + "\n"
    for r in rows:
        names = view.detectors + view.baselines
        passed = [d for d in names if view.kind(r, d) == "pass"]
        na = [d for d in names if view.kind(r, d) == "na"]
        flagged = [d for d in names if view.kind(r, d) in ("false", "error")]
        lines.append(f"- **{r['backend']}**: passes {len(passed)} of {len(names)} (detectors "
                     f"and baselines), n/a on {len(na)}, flagged by "
                     f"{len(flagged) or 'none'}.")
        for d in flagged:
            lines.append(f"  - {FALSE_ALARM} `{d}`: {code(r['cells'][d]['message'])}")
    na_items = [(d, r["backend"], na_reason(r["cells"][d]))
                for d in view.detectors + view.baselines for r in rows
                if view.kind(r, d) == "na"]
    if na_items:
        lines += ["", "Not applicable:", ""]
        for d, reason, backends in group_by_reason(na_items):
            lines.append(f"- `{d}` on {', '.join(backends)}: {reason}")
    return "\n".join(lines).rstrip() + "\n"


def index_page(view, varlen=()):
    """The index; ``varlen``: the lines of the varlen contract's section, from its own JSON."""
    import zoo  # the zoo imports every entry and torch: only when pages are made

    s = view.data.get("summary", {})
    sources = f"zoo/ and {JSON_PATH.as_posix()}"
    if varlen:
        sources = f"zoo/, {JSON_PATH.as_posix()} and {VARLEN_JSON.as_posix()}"
    lines = [STAMP.format(sources=sources), "",
             "# The zoo catalogue", "",
             "One page per entry: the lesson, the symptom, the buggy lines as a diff against the "
             "reference, the smallest failing input, and which detectors catch it and why the "
             "others do not. Grouped by category; each line: title, symptom, and for each backend "
             f"how many of the {len(view.detectors)} detectors catch it.", "",
             "![kill matrix](../kill-matrix.png)", "",
             f"The kill matrix as a picture: [`kill-matrix.png`](../kill-matrix.png); as data: "
             f"[`kill-matrix.json`](../kill-matrix.json) (seed {view.data.get('seed', 0)}). "
             "Which kind of oracle catches which kind of bug: "
             "[test-design.md](../test-design.md).", ""]
    if s:
        full, depth = s["full_suite"], s.get("depth", "quick")
        lines.append(f"- {s['bugs']} bugs in {s['bug_rows']} rows; at depth {depth} the full "
                     f"suite catches {full['rows']} rows ({full['bugs']} bugs); "
                     f"{s.get('deeper_rows', 0)} rows show only at a deeper tier, and "
                     f"{len(s.get('missed_rows', ()))} that show at {depth} are missed.")
        for name, b in s["baselines"].items():
            lines.append(f"- baseline `{name}` catches {b['rows']} rows ({b['bugs']} bugs).")
        lines.append(f"- {len(s['caught_by_one_detector'])} rows are caught by one detector "
                     "only; the reference and decoys "
                     f"({s['correct_rows']} rows) raise {s['false_alarms']} false alarms.")
        lines.append("")
    bugs = catalogue.bugs()
    for category in catalogue.categories():
        entries = [e for e in bugs if e.meta.category == category]
        if not entries:
            continue
        lines += [f"## {category}", "", f"*{zoo.CATEGORIES.get(category, '')}*", ""]
        for e in entries:
            rows = view.rows_of(e.id)
            counts = ", ".join(f"{r['backend']} {len(view.caught(r, view.detectors))}/"
                               f"{len(view.detectors)}" for r in rows) or "not in the JSON yet"
            at = s.get("depth", "quick") if s else "quick"
            shows = "" if e.meta.depth == at else f"; it shows at {e.meta.depth}, not {at}"
            lines.append(f"- [`{e.id}`]({e.id}.md) — {e.meta.title}. *{e.meta.symptom}*; "
                         f"detectors that catch it at {at}: {counts}{shows}")
        lines.append("")
    lines += ["## Decoys: correct implementations", "",
              "Correct, but written nothing like the reference; every detector must pass them.",
              ""]
    for e in zoo.DECOYS:
        rows = view.rows_of(e.id)
        flagged = sum(1 for r in rows for d in view.detectors + view.baselines
                      if view.kind(r, d) in ("false", "error"))
        lines.append(f"- [`{e.id}`]({e.id}.md) — {e.meta.title}. {', '.join(e.backends)}; "
                     f"false alarms: {flagged}")
    ref = view.rows_of("reference")
    if ref:
        flagged = sum(1 for r in ref for d in view.detectors + view.baselines
                      if view.kind(r, d) in ("false", "error"))
        lines += ["", "## The reference", "",
                  f"`reference/` ({', '.join(r['backend'] for r in ref)}): the contract's own "
                  f"implementations, also rows of the matrix; false alarms: {flagged}."]
    if varlen:
        lines += [""] + list(varlen)
    return "\n".join(lines).rstrip() + "\n"


