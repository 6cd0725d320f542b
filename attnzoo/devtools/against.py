"""``attnzoo bench --against REV``: today's kill matrix against the kill matrix of an earlier
commit, on this machine, in turn.

A budget such as "no slower than it was" cannot be read off two figures taken on different
days: the machines this project runs on differ from day to day by more than the change being
judged. So both matrices run here, one after the other (A B A B …), each from its own tree
(``git archive REV``, run through the ``attnzoo`` console script that revision declares), and
the comparison is the median of the pair-by-pair wall ratios beside the median walls. Each
run's cells are counted from its JSON, so the report says how much more (or less) the earlier
matrix was asked to do.
"""

import json
import os
import statistics
import subprocess
import tarfile
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path

from attnzoo.checking import BadInput
from attnzoo.devtools import bench


def commit(rev, root):
    """The full hash of ``rev`` in the checkout at ``root``; one line naming what is wrong."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet",
                           f"{rev}^{{commit}}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise BadInput(f"--against {rev}: no such commit in {root}: name one 'git log' shows "
                       "(a shallow clone may need 'git fetch --unshallow')")
    return done.stdout.strip()


@contextmanager
def tree(sha, root):
    """The files of commit ``sha``, written to a temporary folder (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix=f"attnzoo-{sha[:7]}-") as folder:
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["git", "-C", str(root), "archive", "--format=tar", sha],
                           stdout=archive, check=True)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(folder, filter="data")
        yield Path(folder)


def console_command(folder, argv):
    """The command line that runs ``attnzoo ARGV`` from the tree in ``folder``, through the
    console script its own pyproject.toml declares, importing nothing from another tree."""
    try:
        scripts = tomllib.loads((folder / "pyproject.toml").read_text())["project"]["scripts"]
        module, function = scripts["attnzoo"].split(":")
    except (OSError, KeyError, ValueError, tomllib.TOMLDecodeError):
        raise BadInput(f"{folder.name}: its pyproject.toml declares no 'attnzoo' console "
                       "script: --against needs a commit that has one") from None
    code = (f"import sys; sys.path.insert(0, {str(folder)!r}); import {module} as m; "
            f"assert m.__file__.startswith({str(folder)!r}), m.__file__; "
            f"sys.exit(m.{function}(sys.argv[1:]))")
    return [bench.PY, "-c", code, *argv]


def compare(rev, repeats, root=None, check=None):
    """Today's ``attnzoo matrix`` and that of ``rev``, in turn, ``repeats`` times each; with
    ``check`` (the arguments of ``attnzoo check``), that check instead, its calls counted."""
    root = root or bench.ROOT
    sha = commit(rev, root)
    head = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                          capture_output=True, text=True).stdout.strip()
    what = ["check", *check, "--json"] if check else ["matrix", "--format", "json", "--output"]
    with tempfile.TemporaryDirectory(prefix="attnzoo-against-") as out, \
            tree(sha, root) as folder:
        paths = {side: os.path.join(out, f"{side}.json") for side in ("today", "then")}
        argv = {side: what if check else what + [paths[side]] for side in paths}
        sides = {"today": ([bench.PY, "-m", "attnzoo", *argv["today"]], root),
                 "then": (console_command(folder, argv["then"]), folder)}
        runs = {side: [] for side in sides}
        cells, matrices = {}, {side: [] for side in sides}
        for _ in range(repeats):
            for side, (cmd, cwd) in sides.items():
                run = bench.once(cmd, cwd=cwd)
                if run[2].returncode not in (0, 1):  # 1: flagged, or a failing cell: whole
                    raise RuntimeError(f"the {side} {what[0]} exited {run[2].returncode}: "
                                       f"{run[2].stderr.strip()[-500:]}")
                runs[side].append(run)
                if check:
                    cells[side] = _calls(run[2].stdout)
                else:
                    matrices[side].append(_matrix(paths[side]))
                    cells[side] = len(matrices[side][-1])
    shown = {"today": ["attnzoo", *what[:1 + len(check or ())]],
             "then": ["attnzoo", *what[:1 + len(check or ())], f"(at {sha[:12]})"]}
    figures = {side: dict(bench.figure(shown[side], r), cells=cells[side])
               for side, r in runs.items()}
    figures["today"]["commit"], figures["then"]["commit"] = head, sha
    pairs = [a[0] / b[0] for a, b in zip(runs["today"], runs["then"])]
    report = {"machine": bench.machine(), "against": rev, **figures,
              "wall_ratio_pairs": bench.spread(pairs),
              "wall_ratio_medians": round(figures["today"]["wall"]["median"]
                                          / figures["then"]["wall"]["median"], 3),
              "cpu_per_cell_ratio": round(
                  (figures["today"]["cpu"]["median"] / cells["today"])
                  / (figures["then"]["cpu"]["median"] / cells["then"]), 3)}
    if not check:
        report.update(_growth(matrices, figures))
    return report


def _calls(stdout):
    """The calls a check's JSON says it made into the implementation."""
    return json.loads(stdout)["summary"]["calls"]


def _matrix(path):
    """(row, detector) -> (calls, seconds) of every cell of one matrix run's JSON."""
    doc = json.loads(Path(path).read_text())
    return {(row["row"], d): (c.get("calls") or 0, c.get("seconds") or 0.0)
            for row in doc["rows"] for d, c in row["cells"].items()}


def _growth(matrices, figures):
    """Where a larger matrix's time goes: the calls each side made, the CPU per call, and the
    cells both have (the same row, the same detector) timed on each side, apart from the
    rows and detectors only one side has. Each figure is the median over the runs."""
    shared = set(matrices["today"][0]).intersection(matrices["then"][0])

    def median(side, keys, part):
        return round(statistics.median(sum(m[k][part] for k in keys) for m in matrices[side]), 3)

    calls = {side: median(side, matrices[side][0], 0) for side in matrices}
    seconds = {side: median(side, shared, 1) for side in matrices}
    return {"calls": calls,
            "cpu_per_call_ratio": round(
                (figures["today"]["cpu"]["median"] / max(calls["today"], 1))
                / (figures["then"]["cpu"]["median"] / max(calls["then"], 1)), 3),
            "shared_cells": {"cells": len(shared), "calls": median("today", shared, 0),
                             "seconds": seconds,
                             "ratio": round(seconds["today"] / seconds["then"], 3)
                             if seconds["then"] else None}}


def render(r):
    m = r["machine"]
    what = r["today"]["command"]
    lines = [f"{m['date']}, {m['cores']} cores, {m['cpu'] or m['platform']}: `{what}` "
             f"today ({r['today']['commit']}) and at {r['against']} "
             f"({r['then']['commit'][:12]}), in turn, {r['today']['runs']} "
             f"run{'s' if r['today']['runs'] != 1 else ''} each", "",
             f"| {'matrix | cells' if what == 'attnzoo matrix' else 'check | calls'} | median "
             "wall | min | max | median CPU |",
             "|---|---|---|---|---|---|"]
    for side in ("today", "then"):
        f = r[side]
        w = f["wall"]
        lines.append(f"| {'today' if side == 'today' else r['against']} | {f['cells']} | "
                     f"{w['median']:.2f} s | {w['min']:.2f} s | {w['max']:.2f} s | "
                     f"{f['cpu']['median']:.2f} s |")
    p = r["wall_ratio_pairs"]
    lines += ["", f"today / {r['against']}, wall: {p['median']:.3f} (median of the pairs; "
              f"{p['min']:.3f}–{p['max']:.3f}), {r['wall_ratio_medians']:.3f} (of the medians); "
              f"CPU per {'cell' if what == 'attnzoo matrix' else 'call'}: "
              f"{r['cpu_per_cell_ratio']:.3f}"]
    if "shared_cells" in r:
        lines.append(growth(r))
    return "\n".join(lines)


def growth(r):
    """A matrix comparison's calls and shared cells, in a sentence."""
    calls, shared = r["calls"], r["shared_cells"]
    ratio = "" if shared["ratio"] is None else f" ({shared['ratio']:.3f} of then)"
    return (f"Calls into the implementations: {calls['today']:.0f} today, {calls['then']:.0f} then "
            f"({calls['today'] / max(calls['then'], 1):.2f}×), {r['cpu_per_call_ratio']:.3f} of "
            f"the CPU per call. The {shared['cells']} cells both matrices have (the same row and "
            f"detector) took {shared['seconds']['today']:.2f} s of cell time today and "
            f"{shared['seconds']['then']:.2f} s then{ratio}; the rest of today's time is the "
            "rows and detectors added since.")
