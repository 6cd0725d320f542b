"""``docs/mutants.png``: the share of each reference method's mutants each detector kills."""

from attnzoo.vocabulary import CAUGHT
from detectors import by_name


def method_of(name):
    """'reference.sdpa.xǁScaledDotProductAttentionǁbias__mutmut_4' -> 'sdpa.bias'."""
    module, _, mangled = name.rpartition(".")
    body = mangled.split("__mutmut_")[0]
    method = body.split("ǁ")[-1] if "ǁ" in body else body.removeprefix("x_")
    return f"{module.removeprefix('reference.').removeprefix('lesson_')}.{method}"


def heatmap(doc, path):
    """docs/mutants.png: share of each reference method's mutants that each detector kills."""
    import matplotlib  # matplotlib, a developer's dependency: only when a picture is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    caught = CAUGHT
    cells, names = doc["cells"], doc["detectors"] + doc["baselines"]
    methods = sorted({method_of(m) for m in cells})
    members = {meth: [m for m in cells if method_of(m) == meth] for meth in methods}
    kinds = {n: getattr(by_name().get(n), "ORACLE", "baseline") for n in names}
    rows = ["any detector"] + names
    grid, text = [], []
    for r in rows:
        line, labels = [], []
        for meth in methods:
            ms = members[meth]
            if r == "any detector":
                k = sum(any(cells[m][d] in caught for d in doc["detectors"]) for m in ms)
            else:
                k = sum(cells[m][r] in caught for m in ms)
            line.append(k / len(ms))
            labels.append(f"{k}/{len(ms)}")
        grid.append(line)
        text.append(labels)
    with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
        fig = Figure(figsize=(3.2 + 0.85 * len(methods), 2.4 + 0.3 * len(rows)))
        FigureCanvasAgg(fig)
        ax = fig.add_axes([0.27, 0.03, 0.70, 0.78])
        ax.imshow(grid, cmap="Greens", vmin=0, vmax=1, aspect="auto")
        for i, labels in enumerate(text):
            for j, label in enumerate(labels):
                ax.text(j, i, label, ha="center", va="center", fontsize=7,
                        color="white" if grid[i][j] > 0.6 else "black")
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels(methods, rotation=40, ha="left", fontsize=8)
        ax.xaxis.tick_top()
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r if r == "any detector" else f"{r}  [{kinds[r]}]" for r in rows],
                           fontsize=8)
        ax.axhline(0.5, color="black", linewidth=1.5)
        s = doc["mutmut"]
        fig.text(0.02, 0.985, "Mutants of reference/ killed, per detector and method",
                 ha="left", va="top", fontsize=11, fontweight="bold")
        fig.text(0.02, 0.96, f"mutmut: {s['killed']}/{s['total']} killed, score {s['score']:.1%}"
                 "; a cell is killed/mutants of that method", ha="left", va="top", fontsize=8)
        fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
