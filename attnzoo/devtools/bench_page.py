"""The figures of docs/benchmarks.md, rendered from the JSON the measuring commands wrote.

The page's prose is written by hand; each table sits between ``<!-- generated:NAME -->`` and
``<!-- /generated:NAME -->`` and is a pure function of the committed JSON files in
:data:`SOURCES`, so a figure on the page is always the one its file holds. ``attnzoo docs``
writes the page, ``attnzoo docs --check`` (and tests/test_readme.py) names it when it is stale.
When and at which commit a figure was measured stays in its file (``machine``, ``against``):
the page names the file, not the date.
"""

import json
from pathlib import Path

from attnzoo.devtools import against
from attnzoo.devtools.docs.data import BLOCK
from attnzoo.devtools.flagged import FLAGGED, TILED

ROOT = Path(__file__).resolve().parents[2]
PAGE = Path("docs/benchmarks.md")
SOURCES = {  # short name -> the committed JSON it is read from
    "bench": Path("docs/benchmark.json"),
    "checks": Path("docs/benchmark-checks.json"),
    "against": Path("docs/benchmark-against.json"),
    "against-coverage": Path("docs/benchmark-against-coverage.json"),
    "against-per-case": Path("docs/benchmark-against-per-case.json"),
    "against-deep-check": Path("docs/benchmark-against-deep-check.json"),
    "against-varlen-check": Path("docs/benchmark-against-varlen-check.json"),
    "flagged": Path("docs/benchmark-flagged.json"),
    "seeds-standard": Path("docs/seed-sweep-standard.json"),
    "seeds-deep": Path("docs/seed-sweep-deep-correct.json"),
    "survey": Path("docs/survey.json"),
    "mutants": Path("docs/mutants.json"),
    "gate": Path("docs/benchmark-budgets.json"),
}
NUMPY = "reference/lesson_numpy.py"
SDPA = "torch.nn.functional:scaled_dot_product_attention"
# What the figures should stay under: (what, where in its JSON, the most it may be, unit).
# A figure is looked up in every file that has it, so the same budget may show twice.
MEASURED = ("bench", "checks")  # the files of the whole bench and of --checks
# (what, its keys in a file, at most, unit, the files it is read from)
BUDGETS = (
    ("the test command", ("pytest", "wall", "median"), 60, " s", MEASURED),
    ("the test command over `attnzoo matrix`", ("test_run_over_matrix",), 1.5, "×", MEASURED),
    (f"`attnzoo check {NUMPY}` at standard",
     ("check", f"{NUMPY} --depth standard", "wall", "median"), 5, " s", MEASURED),
    (f"`attnzoo check {SDPA}` at standard",
     ("check", f"{SDPA} --depth standard", "wall", "median"), 15, " s", MEASURED),
    (f"`attnzoo check {SDPA}` at deep",
     ("check", f"{SDPA} --depth deep", "wall", "median"), 120, " s", MEASURED),
    ("a flagged check over the same kernel's clean one", ("wall_ratio_pairs", "median"), 1.5,
     "×", ("flagged",)),
    ("`attnzoo matrix` over itself before the coverage model (`--against`)",
     ("wall_ratio_pairs", "median"), 1.2, "×", ("against-coverage",)),
)


def load(root=ROOT):
    """{short name: document} of every source."""
    out = {}
    for name, path in SOURCES.items():
        with open(Path(root) / path, encoding="utf-8") as f:
            out[name] = json.load(f)
    return out


def source(name):
    return f"[`{SOURCES[name].as_posix()}`]({SOURCES[name].name})"


def machine(doc):
    m = doc["machine"]
    return (f"{m['cores']} cores ({m['cpu'] or m['platform']}), Python {m['python']}, "
            f"numpy {m['numpy']}, torch {m['torch']}")


def seconds(fig):
    w = fig["wall"]
    return f"{w['median']:.2f} s | {w['min']:.2f}–{w['max']:.2f} s"


def row(what, fig):
    return f"| {what} | {seconds(fig)} | {fig['cpu']['median']:.2f} s | {fig['runs']} |"


def check_rows(checks):
    return [row(f"`attnzoo check {target}`", fig) for target, fig in checks.items()]


def block_bench(data):
    r = data["bench"]
    cells = r.get("xdist_vs_serial", {}).get("cells")
    matrix = "`attnzoo matrix` (a process per processor" + (f", {cells} cells)" if cells else ")")
    lines = [f"{source('bench')}, on {machine(r)}:", "",
             "| what | median wall | min–max | median CPU | runs |", "|---|---|---|---|---|"]
    lines += [row("the test command (`python -m pytest`)", r["pytest"]), row(matrix, r["matrix"])]
    lines += check_rows(r["check"])
    lines += ["", f"The test command takes {r['test_run_over_matrix']:.2f}× the wall of "
              "`attnzoo matrix` (medians, the two run in turn)."]
    lines += ["", "| battery | matrix wall | per unit of battery |", "|---|---|---|"]
    for scale, s in r["scaling"].items():
        lines.append(f"| {scale}× | {s['wall']:.1f} s | {s['per_unit']:.1f} s |")
    lines += ["", "| check | harness share of wall | time inside the implementation |",
              "|---|---|---|"]
    for target, fig in r["check"].items():
        lines.append(f"| `{target}` | {fig['harness_share']:.0%} | {fig['impl_seconds']:.2f} s |")
    n_detectors = len(r["per_detector"]) - len(r["baselines"])
    caught = next(iter(r["baselines"].values()))["full_suite_catches"]
    lines += ["", "| suite | seconds over the whole zoo | bug rows caught | the full suite is "
              "slower by | and catches more by |", "|---|---|---|---|---|",
              f"| the full suite ({n_detectors} detectors) | {r['full_suite_seconds']:.1f} | "
              f"{caught}/{r['bug_rows']} | | |"]
    for name, b in r["baselines"].items():
        lines.append(f"| `{name}` | {b['seconds']:.1f} | {b['bug_rows']}/{r['bug_rows']} | "
                     f"{b['full_suite_time_ratio']}× | +{b['extra_bug_rows_caught']} rows |")
    lines += ["", "| detector | seconds over the whole zoo | calls | inside the implementation |",
              "|---|---|---|---|"]
    for name, d in sorted(r["per_detector"].items(), key=lambda x: -x[1]["seconds"]):
        lines.append(f"| `{name}` | {d['seconds']:.2f} | {d['calls']} | "
                     f"{d['impl_seconds']:.2f} s |")
    if "xdist_vs_serial" in r:
        x = r["xdist_vs_serial"]
        lines += ["", f"The kill matrix of a serial and an `-n 2` pytest run: {x['cells']} cells, "
                  + ("identical." if x["identical"] else
                     f"different in {', '.join(x['differing'])}.")]
    return lines


def block_checks(data):
    r = data["checks"]
    return [f"{source('checks')}, on {machine(r)}:", "",
            "| what | median wall | min–max | median CPU | runs |", "|---|---|---|---|---|",
            *check_rows(r["check"])]


AGAINST = ("against", "against-per-case", "against-coverage", "against-deep-check",
           "against-varlen-check")


def block_against(data):
    lines = []
    for name in AGAINST:
        lines += ([""] if lines else []) + _against(name, data[name])
    return lines


def _against(name, r):
    today, then = r["today"], r["then"]
    p = r["wall_ratio_pairs"]
    unit = "cell" if today["command"] == "attnzoo matrix" else "call"  # --check compares calls
    lines = [f"{source(name)}, on {machine(r)}; *then* is {r['against']}, run from its own tree "
             "through its own `attnzoo` console script:", "",
             f"| `{today['command']}` | {unit}s | median wall | min–max | median CPU | runs |",
             "|---|---|---|---|---|---|"]
    for side, fig in (("today", today), ("then", then)):
        at = f" ({fig['commit'][:7]})" if fig.get("commit") else ""
        lines.append(f"| {side}{at} | {fig['cells']} | {seconds(fig)} | "
                     f"{fig['cpu']['median']:.2f} s | {fig['runs']} |")
    lines += ["", f"Today over then: {p['median']:.3f} of the wall (median of the pairs; "
              f"{p['min']:.3f}–{p['max']:.3f}), and {r['cpu_per_cell_ratio']:.3f} of the "
              f"CPU per {unit}, with {today['cells'] / then['cells']:.2f}× the {unit}s."]
    return lines + (["", against.growth(r)] if "shared_cells" in r else [])


def block_flagged(data):
    r = data["flagged"]
    names = {"flagged": f"`{FLAGGED}` (one defect)", "tiled": f"`{TILED}` (without it)",
             "clean": f"`{SDPA}`"}
    lines = [f"{source('flagged')}, `attnzoo check --depth {r['depth']}` on {machine(r)}:", "",
             "| target | exit | detectors flagging | calls | median wall | min–max | runs |",
             "|---|---|---|---|---|---|---|"]
    for side, name in names.items():
        f = r[side]
        lines.append(f"| {name} | {f['exit_code']} | {f['flagged']}/{f['detectors']} | "
                     f"{f['calls']} | {seconds(f)} | {f['runs']} |")
    for key, what in (("", "the same kernel without its defect"), ("_sdpa", "torch's SDPA")):
        p = r[f"wall_ratio_pairs{key}"]
        budget = "" if key else f"; budget {r['budget']:g}"
        lines += ["", f"Flagged over {what}: {p['median']:.3f} of the wall (median of the "
                  f"pairs; {p['min']:.3f}–{p['max']:.3f}){budget}."]
    if r["void"]:
        lines += ["", *(f"Void: {why}" for why in r["void"])]
    return lines


def block_seeds(data):
    lines = ["| sweep | rows | at | depth | seeds | cells | failing cells on any seed | cells "
             "whose verdict depends on the seed | seconds a seed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in ("seeds-standard", "seeds-deep"):
        r = data[name]
        per = [s["seconds"] for s in r["per_seed"]]
        rows = r.get("rows")
        rows = ("not recorded" if rows is None else "the whole matrix" if rows == "all"
                else f"{len(rows)} entries")
        lines.append(f"| {source(name)} | {rows} | {r.get('commit') or '?'} | {r['depth']} | "
                     f"{r['seeds']} | {r['cells']} | "
                     f"{max(s['failing_cells'] for s in r['per_seed'])} | "
                     f"{len(r['seed_dependent'])} | {min(per):.1f}–{max(per):.1f} |")
    return lines


def block_long_runs(data):
    ran = [i for i in data["survey"]["implementations"] if not i.get("skipped")]
    slowest = max(ran, key=lambda i: i["seconds"])
    m = data["mutants"]
    how = (f" at --depth {data['survey']['depth']}, --budget {data['survey']['budget']:g} s "
           "each" if data["survey"].get("depth") else "")
    return [f"- `attnzoo survey` ({source('survey')}): {len(ran)} implementations{how} in "
            f"{sum(i['seconds'] for i in ran):.0f} s, the slowest `{slowest['name']}` "
            f"({slowest['seconds']:.0f} s).",
            f"- `attnzoo mutants` ({source('mutants')}): {m['mutmut']['total']} mutants, "
            f"{m['seconds']:.0f} s."]


def block_gate(data):
    from attnzoo.devtools.budgets import render as table

    d = data["gate"]
    late = [r for r in d["results"] if not r["measured"]["caught"]]
    return [f"{source('gate')}, `attnzoo check --depth {d['depth']} --budget {d['budget']} "
            f"--exitfirst` on every bug row of the zoo, {machine(d)}, at {d['commit'][:7]}; "
            f"{d['rows']} rows, {d['deeper_rows']} of them bugs that show only at a deeper "
            "tier than quick:", "", table(d), "",
            "Not caught within the longest budget: "
            + (", ".join(f"`{r['row']}` ({r['depth']})" for r in late) or "none") + "."]


def block_budgets(data):
    lines = ["| figure | at most | measured | file |", "|---|---|---|---|"]
    for what, keys, most, unit, sources in BUDGETS:
        for name in sources:
            value = data[name]
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                continue
            verdict = "within" if value <= most else "**over**"
            lines.append(f"| {what} | {most:g}{unit} | {value:.2f}{unit}, {verdict} | "
                         f"{source(name)} |")
    return lines


BLOCKS = {"bench": block_bench, "checks": block_checks, "against": block_against,
          "flagged": block_flagged, "seeds": block_seeds, "long-runs": block_long_runs,
          "budgets": block_budgets, "gate": block_gate}


def render(text, data):
    """The page with every generated block filled from ``data``; unknown names are an error."""
    def fill(m):
        name = m.group("name")
        if name not in BLOCKS:
            raise ValueError(f"{PAGE}: unknown generated block {name!r}")
        return m.group(1) + "\n".join(BLOCKS[name](data)) + "\n" + m.group(4)

    return BLOCK.sub(fill, text)


def write(root=ROOT):
    """Fill the page's blocks from the committed JSON; the page's path when it changed."""
    path = Path(root) / PAGE
    have = path.read_text(encoding="utf-8")
    want = render(have, load(root))
    if want == have:
        return []
    path.write_text(want, encoding="utf-8")
    return [PAGE.as_posix()]


def stale(root=ROOT):
    """[(path, why)] when the page's figures are not what the committed JSON holds."""
    path = Path(root) / PAGE
    try:
        have = path.read_text(encoding="utf-8")
        want = render(have, load(root))
    except (OSError, ValueError, KeyError) as e:
        return [(PAGE.as_posix(), f"cannot render: {e!r}")]
    return [] if want == have else [(PAGE.as_posix(), "differs from what the JSON it quotes "
                                     "holds")]
