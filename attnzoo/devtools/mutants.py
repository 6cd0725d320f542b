"""Mutation testing of the detectors: mutmut's score, and which detector kills which mutant.

``attnzoo mutants`` starts from a clean ``mutants/`` (stale verdicts survive otherwise), runs
``mutmut run`` over ``reference/`` with the kill matrix's reference cells as the test
selection, and reads the score from ``mutmut export-cicd-stats`` (``mutmut run`` exits 0 even
when mutants survive). Timeouts count as not killed. Then it activates every mutant in turn —
mutmut's trampolines read ``MUTANT_UNDER_TEST`` on every call — and runs every detector on the
reference rows the mutant can reach, which gives the per-detector mutant matrix no mutation
tool reports: kills per detector, the mutants only one detector kills, and which detectors
are subsumed by others.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from attnzoo.devtools import project
from attnzoo.devtools.mutant_heatmap import heatmap
from attnzoo.matrix import model as matrix
from attnzoo.runner import run
from attnzoo.vocabulary import CAUGHT
from detectors import all_detectors, baseline_suites
from detectors.kit import judge
from detectors.kit.battery import Battery
from detectors.kit.verdict import ERROR, NA, SURVIVED

ROOT = project.find() or Path.cwd()  # the checkout: the command refuses to run without one
# Which reference rows a mutant of each module can reach (sdpa inherits LessonTorch.softmax).
REACHES = {
    "reference.lesson_numpy": ("numpy",),
    "reference.lesson_torch": ("torch", "sdpa"),
    "reference.sdpa": ("sdpa",),
}


def environment():
    """A child environment: torch's thread pools in forked workers deadlock without this."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def run_mutmut(log):
    """Clean run of mutmut; returns its CI/CD stats."""
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    mutmut = [sys.executable, "-m", "mutmut"]
    with open(log, "w") as out:
        subprocess.run(mutmut + ["run"], cwd=ROOT, env=environment(), stdout=out,
                       stderr=subprocess.STDOUT, check=False)
    subprocess.run(mutmut + ["export-cicd-stats"], cwd=ROOT, env=environment(),
                   capture_output=True, check=True)
    return json.loads((ROOT / "mutants" / "mutmut-cicd-stats.json").read_text())


def mutmut_verdicts():
    """Mutant name -> mutmut's status ("killed", "survived", "timeout", ...)."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=ROOT,
                         env=environment(), capture_output=True, text=True, check=True).stdout
    verdicts = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("reference."):
            verdicts[name] = status.strip()
    return verdicts


def score(stats):
    total = stats["total"]
    killed = stats["killed"]
    not_killed = total - killed  # survived, timeouts, suspicious, no tests, segfaults
    return {
        "total": total,
        "killed": killed,
        "survived": stats["survived"],
        "timeout": stats["timeout"],
        "other_not_killed": not_killed - stats["survived"] - stats["timeout"],
        "score": killed / total if total else 1.0,
    }


def per_detector(names, jobs):
    """Run every detector against every mutant, in ``jobs`` worker processes."""
    chunks = [names[i::jobs] for i in range(jobs)]
    procs = []
    env = environment()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "mutants"), env.get("PYTHONPATH", "")])
    for i, chunk in enumerate(chunks):
        work = ROOT / "mutants" / f"detector-work-{i}.json"
        work.write_text(json.dumps(chunk))
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "attnzoo.devtools.mutants", "--worker", str(work)],
            cwd=ROOT / "mutants", env=env), work))
    cells = {}
    for proc, work in procs:
        if proc.wait() != 0:
            raise RuntimeError(f"mutant worker failed with code {proc.returncode}")
        cells.update(json.loads(work.with_suffix(".out.json").read_text()))
    return cells


def worker(work):
    """Inside mutants/: activate each mutant and run every detector on its reference rows."""
    names = json.loads(Path(work).read_text())
    detectors = all_detectors() + baseline_suites()
    battery = Battery(0)
    rows = {r.backend: r for r in matrix.rows() if r.kind == "reference"}
    cells = {}
    for name in [""] + names:  # "" first: the unmutated reference must be clean
        os.environ["MUTANT_UNDER_TEST"] = name
        judge._reference_error.cache_clear()  # the reference's own error moves with it
        module = name.rsplit(".", 1)[0] if name else ""
        reach = REACHES.get(module, tuple(rows))
        verdicts = {}
        for detector in detectors:
            found = [run(detector, matrix.subject_for(rows[b]), battery).verdict for b in reach]
            verdicts[detector.NAME] = _worst(found)
        if not name:
            dirty = [d for d, v in verdicts.items() if v not in (SURVIVED, NA)]
            if dirty:
                raise RuntimeError(f"the unmutated reference is flagged by {dirty}")
            continue
        cells[name] = verdicts
    Path(work).with_suffix(".out.json").write_text(json.dumps(cells))


def _worst(verdicts):
    for v in (ERROR, *CAUGHT, SURVIVED):
        if v in verdicts:
            return v
    return NA


def analyse(cells, verdicts, detector_names, baseline_names):
    """Per detector: kills, kills no other detector makes, and who subsumes it."""
    caught = CAUGHT
    kills = {d: {m for m, row in cells.items() if row[d] in caught}
             for d in detector_names + baseline_names}
    suite = detector_names
    killed_by_suite = {m for m in cells if any(cells[m][d] in caught for d in suite)}
    report = {}
    for d in detector_names + baseline_names:
        others = [o for o in suite if o != d]
        only = sorted(m for m in kills[d] if not any(m in kills[o] for o in others))
        subsumed = sorted(o for o in others if kills[d] and kills[d] <= kills[o])
        report[d] = {
            "kills": len(kills[d]),
            "only_this_detector": only if d in suite else [],
            "subsumed_by": subsumed,
            "errors": sorted(m for m, row in cells.items() if row[d] == "error"),
        }
    missed = sorted(m for m in cells if m not in killed_by_suite)
    return {
        "mutants": len(cells),
        "killed_by_detectors": len(killed_by_suite),
        "survive_every_detector": missed,
        "mutmut_disagrees": sorted(m for m in cells if (m in killed_by_suite)
                                   != (verdicts.get(m) == "killed")),
        "detectors": report,
    }


def render(summary, analysis, cells, detector_names, baseline_names):
    lines = [
        "mutation testing of reference/ with mutmut",
        f"  mutants {summary['total']}, killed {summary['killed']}, survived "
        f"{summary['survived']}, timeouts {summary['timeout']} (counted as not killed), "
        f"other not killed {summary['other_not_killed']}",
        f"  mutation score {summary['score']:.1%}",
        "",
        f"per-detector mutant matrix ({analysis['mutants']} mutants; "
        f"{analysis['killed_by_detectors']} killed by at least one detector)",
    ]
    width = max(len(d) for d in detector_names + baseline_names)
    lines.append(f"  {'detector':<{width}}  kills  alone  subsumed by")
    for d in detector_names + baseline_names:
        r = analysis["detectors"][d]
        tag = " (baseline)" if d in baseline_names else ""
        subsumed = ", ".join(r["subsumed_by"][:3]) + (" …" if len(r["subsumed_by"]) > 3 else "")
        lines.append(f"  {d:<{width}}  {r['kills']:>5}  {len(r['only_this_detector']):>5}  "
                     f"{subsumed or '-'}{tag}")
    alone = {m: d for d in detector_names for m in analysis["detectors"][d]["only_this_detector"]}
    if alone:
        lines.append("")
        lines.append("mutants only one detector kills:")
        lines += [f"  {m}  ← {d}" for m, d in sorted(alone.items())]
    if analysis["survive_every_detector"]:
        lines.append("")
        lines.append("mutants no detector kills:")
        lines += [f"  {m}" for m in analysis["survive_every_detector"]]
    return "\n".join(lines)


def check(path):
    """Without running mutmut: is every mutant of ``path`` killed by a detector there is today?

    The file records each detector's verdict on each mutant. A mutant whose only killers have
    left the suite survives now; a detector the file does not know has never met the mutants;
    a run that did not kill every mutant is not done. Each problem is one line; exit 1 if any.
    """
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    today = [d.NAME for d in all_detectors()]
    problems = []
    unknown = [d for d in today if d not in doc["detectors"]]
    if unknown:
        problems.append(f"{', '.join(unknown)} never ran against the mutants: rerun "
                        "'attnzoo mutants'")
    s = doc["mutmut"]
    if s["killed"] != s["total"]:
        problems.append(f"the last run killed {s['killed']} of {s['total']} mutants")
    alive = sorted(m for m, row in doc["cells"].items()
                   if not any(row.get(d) in CAUGHT for d in today))
    for m in alive:
        gone = [d for d in doc["detectors"] if d not in today and doc["cells"][m].get(d) in CAUGHT]
        why = f" (only {', '.join(gone)} killed it)" if gone else ""
        problems.append(f"{m} survives every detector of today's suite{why}")
    for line in problems:
        print(line)
    print(f"{path}: {len(doc['cells'])} mutants, {len(doc['cells']) - len(alive)} killed by "
          f"today's {len(today)} detectors" + ("" if problems else "; done"))
    return 1 if problems else 0


def main_run(output, jobs, log):
    start = time.perf_counter()
    stats = run_mutmut(log)
    summary = score(stats)
    verdicts = mutmut_verdicts()
    cells = per_detector(sorted(verdicts), jobs)
    dets = [d.NAME for d in all_detectors()]
    bases = [b.NAME for b in baseline_suites()]
    analysis = analyse(cells, verdicts, dets, bases)
    print(render(summary, analysis, cells, dets, bases))
    doc = {"schema": "attnzoo.mutants/1", "mutmut": summary, "mutmut_verdicts": verdicts,
           "detectors": dets, "baselines": bases, "cells": cells, "analysis": analysis,
           "seconds": round(time.perf_counter() - start, 1)}
    Path(output).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    picture = Path(output).with_suffix(".png")
    heatmap(doc, picture)
    print(f"\nper-detector mutant matrix written to {output} and {picture} "
          f"({doc['seconds']:.0f} s; mutmut's log: {log})")
    return 0 if summary["killed"] == summary["total"] else 1


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(sys.argv[2])
