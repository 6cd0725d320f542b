"""``attnzoo bench``: how long the harness takes, as medians over repeated whole runs.

Every figure is a whole command timed from outside (wall clock with ``time.perf_counter``,
CPU from ``resource.getrusage`` of the children), repeated, and reported as median, min and
max — this machine is shared and noisy, so single timings mean little. Per-detector costs and
the harness overhead come from the findings' own timings (``seconds`` of a check, and
``impl_seconds`` spent inside the implementation's calls).
"""

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from attnzoo.devtools import project

ROOT = project.find() or Path.cwd()  # the checkout: the command refuses to run without one
PY = sys.executable
SDPA = "torch.nn.functional:scaled_dot_product_attention"
CHECKS = (  # (target, depth): today's check figures, and the budgets of the deeper tiers
    ("reference/lesson_numpy.py", "quick"),
    ("reference/lesson_numpy.py", "standard"),
    (SDPA, "quick"),
    (SDPA, "standard"),
    (SDPA, "deep"),
)


def once(cmd, env=None, cwd=None):
    """(wall, CPU of the children, finished process) of one run of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd or ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done


def figure(cmd, runs):
    walls, cpus, last = zip(*runs)
    return {"command": " ".join(cmd), "runs": len(runs), "exit_code": last[-1].returncode,
            "wall": spread(walls), "cpu": spread(cpus)}


def timed(cmd, repeats, env=None):
    """Median/min/max wall and CPU seconds of a command run ``repeats`` times."""
    runs = [once(cmd, env) for _ in range(repeats)]
    return figure(cmd, runs), runs[-1][2]


def side_by_side(first, second, repeats):
    """Two commands run in turn, ``repeats`` times each, so that both meet the same machine (it
    is shared and noisy); the figures of both and the ratio of their median walls."""
    runs = ([], [])
    for _ in range(repeats):
        for cmd, out in zip((first, second), runs):
            out.append(once(cmd))
    a, b = figure(first, runs[0]), figure(second, runs[1])
    return a, b, round(a["wall"]["median"] / b["wall"]["median"], 2), runs[1][-1][2]


def spread(values):
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def machine():
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy
    import torch

    return {"date": date.today().isoformat(), "cores": os.cpu_count(), "cpu": cpu,
            "python": platform.python_version(), "numpy": numpy.__version__,
            "torch": torch.__version__, "platform": platform.platform()}


def check_costs(repeats):
    """attnzoo check on a NumPy module and an SDPA callable at each depth: wall, and the
    harness share (a deep check runs three times, whatever ``repeats`` asks)."""
    out = {}
    for target, depth in CHECKS:
        cmd = [PY, "-m", "attnzoo", "check", target, "--depth", depth, "--json"]
        figure, last = timed(cmd, 3 if depth == "deep" else repeats)
        doc = json.loads(last.stdout)
        impl = doc["summary"]["impl_seconds"]
        figure["impl_seconds"] = impl
        figure["harness_share"] = round(1 - impl / figure["wall"]["median"], 3)
        figure["detector_seconds"] = doc["summary"]["seconds"]
        out[f"{target} --depth {depth}"] = figure
    return out


def matrix_command(path, scale=1):
    return [PY, "-m", "attnzoo", "matrix", "--format", "json", "--repeat", str(scale),
            "--output", path]


def matrix_costs(repeats, scales, first=None):
    """The kill matrix in-process: per-detector cost, and its growth with the battery.

    ``first``: (figure, JSON document) of scale 1 when it has been timed already."""
    runs = {1: first} if first is not None and 1 in scales else {}
    for scale in scales:
        if scale in runs:
            continue
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        fig, _ = timed(matrix_command(path, scale), repeats if scale == 1 else 1)
        doc = json.loads(Path(path).read_text())
        os.unlink(path)
        runs[scale] = (fig, doc)
    fig, doc = runs[scales[0]]
    per_detector = {}
    for row in doc["rows"]:
        for name, c in row["cells"].items():
            d = per_detector.setdefault(name, {"seconds": 0.0, "impl_seconds": 0.0, "calls": 0})
            d["seconds"] += c["seconds"]
            d["impl_seconds"] += c["impl_seconds"]
            d["calls"] += c["calls"]
    for d in per_detector.values():
        d["seconds"], d["impl_seconds"] = round(d["seconds"], 3), round(d["impl_seconds"], 3)
    summary = doc["summary"]
    full = sum(per_detector[d]["seconds"] for d in doc["detectors"])
    baselines = {
        b: {"seconds": per_detector[b]["seconds"], "bug_rows": summary["baselines"][b]["rows"],
            "full_suite_time_ratio": round(full / max(per_detector[b]["seconds"], 1e-9), 1),
            "full_suite_catches": summary["full_suite"]["rows"],
            "extra_bug_rows_caught": (summary["full_suite"]["rows"]
                                      - summary["baselines"][b]["rows"])}
        for b in doc["baselines"]
    }
    scaling = {str(s): {"wall": runs[s][0]["wall"]["median"],
                        "per_unit": round(runs[s][0]["wall"]["median"] / s, 3)} for s in scales}
    return {"matrix": fig, "per_detector": per_detector, "full_suite_seconds": round(full, 3),
            "baselines": baselines, "scaling": scaling, "bug_rows": summary["bug_rows"]}


def xdist_identical():
    """The kill matrix of a serial and a parallel pytest run, compared cell for cell."""
    from attnzoo.matrix.model import from_json

    paths = [tempfile.mktemp(suffix=".json") for _ in range(2)]
    base = [PY, "-m", "pytest", "tests/test_kill_matrix.py", "-q", "-p", "no:cacheprovider"]
    subprocess.run(base + ["-p", "no:xdist", "--kill-matrix-json", paths[0]], cwd=ROOT,
                   capture_output=True)
    subprocess.run(base + ["-n", "2", "--kill-matrix-json", paths[1]], cwd=ROOT,
                   capture_output=True)
    serial, parallel = (from_json(json.loads(Path(p).read_text())) for p in paths)
    for p in paths:
        os.unlink(p)
    differ = sorted(k for k in serial if serial[k] != parallel.get(k))
    return {"cells": len(serial), "identical": serial == parallel, "differing": differ[:20]}


def write(report, output):
    Path(output).write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwritten to {output}")


def run(repeats=3, scales=(1, 2, 4), output=None, compare_xdist=True,
        ratio_only=False, checks_only=False):
    """The whole benchmark (written to ``output``, docs/benchmark.json unless named), or with
    ``ratio_only`` / ``checks_only`` one part of it (written only where ``output`` names)."""
    report = {"machine": machine()}
    if checks_only:
        report["check"] = check_costs(max(repeats, 5))
        print(render_checks(report))
        if output:
            write(report, output)
        return 0
    test_cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"]  # the README's, quiet
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    report["pytest"], matrix, ratio, _ = side_by_side(test_cmd, matrix_command(path), repeats)
    first = (matrix, json.loads(Path(path).read_text()))
    os.unlink(path)
    report["test_run_over_matrix"] = ratio
    if ratio_only:
        report["matrix"] = matrix
        report["matrix_one_process"], _ = timed(matrix_command(path) + ["--jobs", "1"], repeats)
        os.unlink(path)
        # what of the test command is pytest's own: the same cells as pytest items alone
        report["matrix_in_pytest"], _ = timed(test_cmd + ["tests/test_kill_matrix.py"], repeats)
        print(render_ratio(report))
        if output:
            write(report, output)
        return 0
    report["check"] = check_costs(max(repeats, 5))
    report.update(matrix_costs(repeats, scales, first))
    report["matrix"] = matrix
    if compare_xdist:
        report["xdist_vs_serial"] = xdist_identical()
    print(render(report))
    write(report, output or "docs/benchmark.json")
    return 0


def render_checks(r):
    lines = ["| what | median | min | max | runs |", "|---|---|---|---|---|"]
    for target, fig in r["check"].items():
        w = fig["wall"]
        lines.append(f"| `attnzoo check {target}`, wall | {w['median']:.2f} s | "
                     f"{w['min']:.2f} s | {w['max']:.2f} s | {fig['runs']} |")
    return "\n".join(lines)


def render_ratio(r):
    lines = ["| what | median | min | max | runs |", "|---|---|---|---|---|"]
    for name, key in (("the README's test command", "pytest"), ("`attnzoo matrix`", "matrix"),
                      ("`attnzoo matrix --jobs 1`", "matrix_one_process"),
                      ("the test command on tests/test_kill_matrix.py alone",
                       "matrix_in_pytest")):
        if key not in r:
            continue
        w, c = r[key]["wall"], r[key]["cpu"]
        lines.append(f"| {name}, wall | {w['median']:.2f} s | {w['min']:.2f} s | "
                     f"{w['max']:.2f} s | {r[key]['runs']} |")
        lines.append(f"| {name}, CPU | {c['median']:.2f} s | {c['min']:.2f} s | "
                     f"{c['max']:.2f} s | {r[key]['runs']} |")
    lines += ["", f"test run / matrix, median walls: {r['test_run_over_matrix']:.2f}× "
              "(target: 1.5× or less); exit codes of the last runs: "
              f"{r['pytest']['exit_code']} and {r['matrix']['exit_code']}"]
    return "\n".join(lines)


def render(r):
    m = r["machine"]
    lines = [f"{m['date']}, {m['cores']} cores, {m['cpu'] or m['platform']}, Python "
             f"{m['python']}, numpy {m['numpy']}, torch {m['torch']}", "",
             "| what | median | min | max | runs |", "|---|---|---|---|---|"]

    def row(name, fig, key="wall"):
        w = fig[key]
        lines.append(f"| {name} | {w['median']:.2f} s | {w['min']:.2f} s | {w['max']:.2f} s | "
                     f"{fig['runs']} |")

    row("`python -m pytest` (the README's test command), wall", r["pytest"])
    row("kill matrix alone (`attnzoo matrix`, a process per core), wall", r["matrix"])
    ratio = f"{r['test_run_over_matrix']:.2f}×" if "test_run_over_matrix" in r else "?"
    for target, fig in r["check"].items():
        row(f"`attnzoo check {target}`, wall", fig)
    lines += ["", f"The README's test command takes {ratio} the wall of the kill matrix alone "
              "(medians, the two run in turn on the same machine; the target is 1.5× or less)."]
    lines += ["", "| check | harness share of wall | time inside the implementation |",
              "|---|---|---|"]
    for target, fig in r["check"].items():
        lines.append(f"| `{target}` | {fig['harness_share']:.0%} | {fig['impl_seconds']:.2f} s |")
    lines += ["", "| battery | matrix wall | per unit of battery |", "|---|---|---|"]
    for scale, s in r["scaling"].items():
        lines.append(f"| {scale}× | {s['wall']:.1f} s | {s['per_unit']:.1f} s |")
    lines += ["", "| suite | seconds over the whole zoo | bug rows caught | full suite is slower "
              "by | and catches more by |", "|---|---|---|---|---|"]
    caught = next(iter(r["baselines"].values()))["full_suite_catches"]
    lines.append(f"| full suite ({len(r['per_detector']) - len(r['baselines'])} detectors) | "
                 f"{r['full_suite_seconds']:.1f} | {caught}/{r['bug_rows']} | | |")
    for name, b in r["baselines"].items():
        lines.append(f"| {name} | {b['seconds']:.1f} | {b['bug_rows']}/{r['bug_rows']} | "
                     f"{b['full_suite_time_ratio']}× | +{b['extra_bug_rows_caught']} rows |")
    lines += ["", "| detector | seconds over the whole zoo | calls | inside the implementation |",
              "|---|---|---|---|"]
    for name, d in sorted(r["per_detector"].items(), key=lambda x: -x[1]["seconds"]):
        lines.append(f"| {name} | {d['seconds']:.2f} | {d['calls']} | {d['impl_seconds']:.2f} s |")
    if "xdist_vs_serial" in r:
        x = r["xdist_vs_serial"]
        lines += ["", f"kill matrix, serial vs `-n 2`: {x['cells']} cells, "
                      f"{'identical' if x['identical'] else 'DIFFERENT: ' + str(x['differing'])}"]
    return "\n".join(lines)
