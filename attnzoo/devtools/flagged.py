"""``attnzoo bench --flagged``: what a flagged target costs against a clean one of the same size.

A detector that flags a target does more than one that passes: it learns every case's outcome
for the diagnosis and shrinks the failing case. The budget is that a flagged target's check
costs at most :data:`BUDGET` times a clean one's of the same size. The flagged target is the
bench's own (``bench_targets/flagged_tiled.py``: torch's SDPA signature on a tiled kernel with
one defect past the first key tile); the clean one of the same size is that kernel without the
defect (the decoy ``zoo/decoys/tiled_kernel.py``: the same Python loops, so the same time
inside the implementation), and torch's SDPA is timed beside them. All are checked at the same
depth, in turn (A B C A B C …) so that each meets the same machine, and each comparison is the
median of the pair-by-pair wall ratios beside the ratio of the median walls.
"""

import json

from attnzoo.devtools import bench

FLAGGED = "attnzoo/devtools/bench_targets/flagged_tiled.py:SDPA"
TILED = "zoo/decoys/tiled_kernel.py:SDPA"  # the same kernel without the defect: the same size
BUDGET = 1.5  # a flagged target's check costs at most this many times a clean one's
DUE = {"flagged": 1, "tiled": 0, "clean": 0}  # each check's exit code, for the ratios to mean much


def command(target, depth):
    return [bench.PY, "-m", "attnzoo", "check", target, "--depth", depth, "--json"]


def compare(repeats, depth="deep"):
    """The flagged target's check and SDPA's, in turn, ``repeats`` times each."""
    sides = {"flagged": command(FLAGGED, depth), "tiled": command(TILED, depth),
             "clean": command(bench.SDPA, depth)}
    runs = {side: [] for side in sides}
    for _ in range(repeats):
        for side, cmd in sides.items():
            runs[side].append(bench.once(cmd))
    report = {"machine": bench.machine(), "depth": depth, "budget": BUDGET}
    for side, done in runs.items():
        report[side] = dict(bench.figure(sides[side], done), exit_codes=[r[2].returncode
                                                                          for r in done],
                            **_counts(done[-1][2]))
    for other, key in (("tiled", ""), ("clean", "_sdpa")):  # the budget is against "tiled"
        pairs = [a[0] / b[0] for a, b in zip(runs["flagged"], runs[other])]
        report[f"wall_ratio_pairs{key}"] = bench.spread(pairs)
        report[f"wall_ratio_medians{key}"] = round(report["flagged"]["wall"]["median"]
                                                   / report[other]["wall"]["median"], 3)
    report["void"] = [f"the {side} target's check exited {code}, not {DUE[side]}"
                      for side in DUE for code in sorted(set(report[side]["exit_codes"]))
                      if code != DUE[side]]
    return report


def _counts(done):
    """What the check's JSON says it did: detectors that flagged the target, calls into it."""
    try:
        summary = json.loads(done.stdout)["summary"]
        return {k: summary[k] for k in ("detectors", "flagged", "calls", "impl_seconds")}
    except (ValueError, KeyError, TypeError):
        return {"detectors": None, "flagged": None, "calls": None, "impl_seconds": None}


def render(r):
    m = r["machine"]
    lines = [f"{m['date']}, {m['cores']} cores, {m['cpu'] or m['platform']}: `attnzoo check "
             f"--depth {r['depth']}` on the bench's flagged target, the same kernel without its "
             f"defect and torch's SDPA, in turn, "
             f"{r['flagged']['runs']} run{'s' if r['flagged']['runs'] != 1 else ''} each", "",
             "| target | exit | detectors flagging | calls | median wall | min | max |",
             "|---|---|---|---|---|---|---|"]
    for side, name in (("flagged", FLAGGED), ("tiled", TILED), ("clean", bench.SDPA)):
        f, w = r[side], r[side]["wall"]
        lines.append(f"| `{name}` | {f['exit_code']} | {f['flagged']}/{f['detectors']} | "
                     f"{f['calls']} | {w['median']:.2f} s | {w['min']:.2f} s | "
                     f"{w['max']:.2f} s |")
    lines.append("")
    for key, what in (("", "the same kernel without its defect"), ("_sdpa", "torch's SDPA")):
        p = r[f"wall_ratio_pairs{key}"]
        lines.append(f"flagged / {what}, wall: {p['median']:.3f} (median of the pairs; "
                     f"{p['min']:.3f}–{p['max']:.3f}), {r[f'wall_ratio_medians{key}']:.3f} "
                     "(of the medians)" + (f"; budget {r['budget']:g}" if not key else ""))
    lines += [f"void: {why}" for why in r["void"]]
    return "\n".join(lines)
