"""The kill matrix as text (the terminal, ``pytest``'s summary) and as markdown.

Both read a ``Matrix`` and spell every cell with ``attnzoo.vocabulary``: one glyph per cell,
the legend and the summary lines under the grid.
"""

import textwrap

from attnzoo.matrix.model import columns
from attnzoo.vocabulary import CELLS, glyph, legend

WIDTH = 120  # a terminal's columns the grid and its notes fit in
LABEL = 36  # a row label longer than this is cut, with "…"
COLOURS = {"caught": "\x1b[32m", "failure": "\x1b[1;31m"}  # green; bold red
RESET = "\x1b[0m"


def text(m, colour=False):
    """The grid, one column of two characters per detector (the column number read downwards:
    tens over units), then the baselines after a bar; ``colour`` marks caught cells green and
    failing ones red, for a terminal."""
    cols = columns(m)
    n = len(m.detectors)
    width = min(max(len(r.label) for r in m.rows), LABEL) + 1

    def header(digit):
        cells = [f"{c:>2}"[digit] + " " for c, _ in cols]
        return (" " * width + "".join(cells[:n]) + "| " + "".join(cells[n:])).rstrip()

    heads = [header(0), header(1)]
    lines = ["kill matrix (rows: implementation-backend; columns: detectors, numbered below)",
             *heads]
    kind_of_row = None
    for r in m.rows:
        if r.kind != kind_of_row:
            kind_of_row = r.kind
            lines.append(f"-- {r.kind} " + "-" * (len(heads[0]) - len(r.kind) - 4))
        marks = [_cell(m.kind(r, d), colour) for _, d in cols]
        lines.append((f"{_cut(r.label):<{width}}" + "".join(marks[:n]) + "| "
                      + "".join(marks[n:])).rstrip())
    lines += [""] + textwrap.wrap("legend: " + legend("   "), WIDTH)
    lines += textwrap.wrap("columns: " + ", ".join(f"{c} {d}" for c, d in cols), WIDTH)
    lines += [w for line in summary_lines(m) for w in textwrap.wrap(line, WIDTH,
                                                                     subsequent_indent="  ")]
    return "\n".join(lines)


def _cut(label):
    return label if len(label) <= LABEL else label[:LABEL - 1] + "…"


def _cell(kind, colour):
    g = glyph(kind) + " "
    if not colour or kind is None:
        return g
    k = CELLS[kind]
    tone = COLOURS["failure"] if k.failure else COLOURS["caught"] if k.caught else ""
    return f"{tone}{g}{RESET}" if tone else g


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
