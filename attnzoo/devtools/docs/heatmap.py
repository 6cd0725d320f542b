"""``docs/kill-matrix.png``: the kill matrix as a picture, coloured by ``attnzoo.vocabulary``."""

from attnzoo.devtools.docs.view import View
from attnzoo.vocabulary import CELLS

COLOURS = {k.name: k.colour for k in CELLS.values()}
NA_HATCH = "#c9c9c9"  # n/a cells: white, hatched
LEGEND = {k.name: k.label for k in CELLS.values()}
MARKS = {k.name: k.glyph for k in CELLS.values() if k.marked}  # drawn on the cell too


def heatmap_layout(view):
    """Rows (bugs by category, then decoys, then the reference) and columns (detectors by
    oracle kind, then the baselines), with the gaps between groups, in cell units."""
    groups = []  # (label, [rows])
    for r in view.bug_rows:
        if groups and groups[-1][0] == r["category"]:
            groups[-1][1].append(r)
        else:
            groups.append((r["category"], [r]))
    decoys = [r for r in view.rows if r["kind"] == "decoy"]
    ref = [r for r in view.rows if r["kind"] == "reference"]
    if decoys:
        groups.append(("decoys", decoys))
    if ref:
        groups.append(("reference", ref))
    ys, y = [], 0.0
    for i, (label, rows) in enumerate(groups):
        if i:
            y += 0.6 if label not in ("decoys", "reference") else 1.0
        start = y
        for r in rows:
            ys.append((r, y))
            y += 1
        groups[i] = (label, rows, start, y)
    cols, x = [], 0.0
    col_groups = view.groups() + ([("baselines", view.baselines)] if view.baselines else [])
    spans = []
    for i, (kind, names) in enumerate(col_groups):
        if i:
            x += 0.35 if kind != "baselines" else 1.0
        start = x
        for d in names:
            cols.append((d, x))
            x += 1
        spans.append((kind, start, x))
    return groups, ys, spans, cols, x, y


def heatmap(data, path):
    """docs/kill-matrix.png: deterministic (Agg, no metadata), legible at a glance."""
    import matplotlib  # matplotlib, a developer's dependency: only when a picture is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    view = View(data)
    groups, ys, spans, cols, width, height = heatmap_layout(view)
    cw, ch = 0.26, 0.175  # inches per cell
    fs = 8  # label font size, points
    label_w = max(len(r["row"]) for r, _ in ys) * fs * 0.56 / 72 + 0.25
    cat_w = max(len(g[0]) for g in groups) * 9 * 0.6 / 72 + 0.6
    name_h = max(len(d) for d, _ in cols) * fs * 0.5 / 72 + 0.15
    group_h = 1.05
    title_h = 0.75
    legend_h = 0.25 + 0.2 * ((len(LEGEND) + 1) // 2)
    W = 0.25 + label_w + width * cw + cat_w + 0.2
    H = title_h + group_h + name_h + height * ch + 0.3 + legend_h
    x0, y0 = 0.25 + label_w, title_h + group_h + name_h  # grid's top-left corner, inches

    with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
        fig = Figure(figsize=(W, H), dpi=110)
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, W)
        ax.set_ylim(H, 0)
        ax.axis("off")

        def X(col):
            return x0 + col * cw

        def Y(row):
            return y0 + row * ch

        s = data.get("summary", {})
        ax.text(0.25, 0.32, "Kill matrix: every zoo row × every detector", fontsize=14,
                fontweight="bold", va="center")
        if s:
            sub = (f"seed {s['seed']} · {s['bugs']} bugs in {s['bug_rows']} rows: the full suite "
                   f"catches {s['full_suite']['rows']}, "
                   + ", ".join(f"{n} {b['rows']}" for n, b in s["baselines"].items())
                   + f" · false alarms on {s['correct_rows']} correct rows: {s['false_alarms']}")
            ax.text(0.25, 0.6, sub, fontsize=9, va="center", color="#333333")

        patches, colours, blanks = [], [], []
        for r, y in ys:
            for d, x in cols:
                kind = view.kind(r, d) or "na"
                if kind == "na":
                    blanks.append(Rectangle((X(x), Y(y)), cw, ch))
                else:
                    patches.append(Rectangle((X(x), Y(y)), cw, ch))
                    colours.append(COLOURS[kind])
        ax.add_collection(PatchCollection(patches, facecolors=colours, edgecolors="white",
                                          linewidths=0.6))
        ax.add_collection(PatchCollection(blanks, facecolors=COLOURS["na"],
                                          edgecolors=NA_HATCH, linewidths=0.0, hatch="/////"))
        for r, y in ys:
            for d, x in cols:
                kind = view.kind(r, d)
                if kind in MARKS:
                    ax.text(X(x + 0.5), Y(y + 0.5), MARKS[kind], fontsize=6.5, ha="center",
                            va="center", color="white")
        for r, y in ys:
            ax.text(X(0) - 0.08, Y(y + 0.5), r["row"], fontsize=fs, ha="right", va="center",
                    color="#555555" if r["kind"] != "bug" else "black")
        # row groups: a band on the right with the category's name
        right = X(width) + 0.12
        for i, (label, rows, start, end) in enumerate(groups):
            band = "#f2f2f2" if i % 2 == 0 else "#e4e4e4"
            ax.add_patch(Rectangle((right, Y(start)), 0.07, (end - start) * ch,
                                   facecolor="#444444", edgecolor="none"))
            ax.add_patch(Rectangle((0.1, Y(start) - 0.02), X(0) - 0.1 - 0.03,
                                   (end - start) * ch + 0.04, facecolor=band, edgecolor="none",
                                   zorder=-1))
            ax.text(right + 0.14, Y((start + end) / 2), f"{label}\n({len(rows)} rows)"
                    if label not in ("reference",) else label, fontsize=9, va="center",
                    ha="left", fontweight="bold" if label not in ("decoys", "reference") else
                    "normal", linespacing=1.1)
        # columns: names rotated, oracle kinds on brackets above them
        for d, x in cols:
            ax.text(X(x + 0.5), y0 - 0.08, d, fontsize=fs, rotation=90, ha="center",
                    va="bottom")
        top = y0 - name_h
        for kind, start, end in spans:
            ax.plot([X(start) + 0.03, X(end) - 0.03], [top, top], color="#222222", lw=1.2,
                    solid_capstyle="butt")
            for xx in (X(start) + 0.03, X(end) - 0.03):
                ax.plot([xx, xx], [top, top + 0.06], color="#222222", lw=1.2)
            ax.text(X((start + end) / 2) - 0.04, top - 0.07, kind, fontsize=9, rotation=40,
                    ha="left", va="bottom", rotation_mode="anchor",
                    fontweight="bold" if kind != "baselines" else "normal",
                    style="italic" if kind == "baselines" else "normal")
        # legend, two columns under the grid
        ly = Y(height) + 0.35
        for i, (kind, words) in enumerate(LEGEND.items()):
            lx = x0 - label_w + 0.1 + (i % 2) * 3.6
            yy = ly + (i // 2) * 0.2
            ax.add_patch(Rectangle((lx, yy - 0.07), 0.22, 0.14, facecolor=COLOURS[kind],
                                   edgecolor=NA_HATCH if kind == "na" else "#888888",
                                   linewidth=0.5, hatch="/////" if kind == "na" else None))
            if kind in MARKS:
                ax.text(lx + 0.11, yy, MARKS[kind], fontsize=6.5, ha="center", va="center",
                        color="white")
            ax.text(lx + 0.3, yy, words, fontsize=8.5, va="center")
        fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path
