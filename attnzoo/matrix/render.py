"""The kill matrix as text (the terminal, ``pytest``'s summary) and as markdown.

Both read a ``Matrix`` and spell every cell with ``attnzoo.vocabulary``: one glyph per cell,
the legend and the summary lines under the grid.
"""

from attnzoo.matrix.model import columns
from attnzoo.vocabulary import glyph, legend


def text(m):
    cols = columns(m)
    n = len(m.detectors)
    width = max(len(r.label) for r in m.rows) + 2
    head = " " * width + " ".join(f"{c:>2}" for c, _ in cols[:n])
    head += "  | " + " ".join(f"{c:>2}" for c, _ in cols[n:])
    lines = ["kill matrix (rows: implementation-backend; columns: detectors)", head]
    kind_of_row = None
    for r in m.rows:
        if r.kind != kind_of_row:
            kind_of_row = r.kind
            lines.append(f"-- {r.kind} " + "-" * (len(head) - len(r.kind) - 4))
        marks = [glyph(m.kind(r, d)) for _, d in cols]
        line = f"{r.label:<{width}}" + " ".join(f"{g:>2}" for g in marks[:n])
        line += "  | " + " ".join(f"{g:>2}" for g in marks[n:])
        lines.append(line)
    lines += ["", "legend: " + legend("   ")]
    lines.append("columns: " + ", ".join(f"{c} {d}" for c, d in cols))
    lines += summary_lines(m)
    return "\n".join(lines)


def markdown(m):
    cols = columns(m)
    lines = ["| row | " + " | ".join(c for c, _ in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for r in m.rows:
        lines.append(f"| {r.label} | " + " | ".join(glyph(m.kind(r, d)) for _, d in cols) + " |")
    lines += ["", "Columns: " + ", ".join(f"**{c}** `{d}`" for c, d in cols), ""]
    lines.append("Legend: " + legend("; "))
    lines += [""] + [f"- {line}" for line in summary_lines(m)]
    return "\n".join(lines)


def summary_lines(m):
    s = m.summary()
    full = s["full_suite"]
    deeper, missed = s["deeper_rows"], s["missed_rows"]
    out = [
        f"full suite at {s['depth']}: caught {full['rows']}/{s['bug_rows']} bug rows "
        f"({full['bugs']}/{s['bugs']} bugs); not at this depth: {deeper} "
        f"(they show at a deeper tier); missed: {len(missed)}"
        + (f" ({', '.join(missed)})" if missed else ""),
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


FORMATS = {"text": text, "markdown": markdown}
