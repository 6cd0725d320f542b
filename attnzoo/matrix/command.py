"""``attnzoo matrix``: every zoo row against every detector, without pytest."""

import json
import os
import subprocess
import sys
import time

from attnzoo import catalogue
from attnzoo.checking import BadInput, check_device, check_seed
from attnzoo.inert import inert
from attnzoo.matrix import model, render


def main(args):
    """The matrix (exit 1 when a cell fails), or with ``--seeds`` the seed-dependent cells."""
    if args.repeat < 1:
        raise BadInput("--repeat must be at least 1")
    if args.jobs < 1:
        raise BadInput(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs > 1 and args.device != "cpu":
        args.jobs = 1  # one CUDA context per forked process is what fork cannot give
    check_seed(args.seed)
    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise BadInput(f"cannot write {args.output}: its folder does not exist")
    only = set(args.only or ())
    missing = only - catalogue.known_ids()
    if missing:
        raise BadInput(f"no zoo entry {sorted(missing)[0]!r}: see 'attnzoo list'")
    select = (lambda r: r.id in only) if only else None
    check_device(args.device)
    if args.seeds is not None:
        return seed_sweep(args, select)
    m = model.evaluate(args.seed, args.repeat, select=select, device=args.device,
                       dtype=args.dtype, depth=args.depth, jobs=args.jobs,
                       snippets=args.format == "json")  # text and markdown show none
    if args.format == "json":
        _write(args, model.dumps(m))
    elif args.format == "text":  # colour only on a terminal, and never under NO_COLOR
        tty = args.output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        _write(args, render.text(m, colour=tty))
    else:
        _write(args, render.FORMATS[args.format](m))
    return 1 if m.failures() else 0


def _write(args, out):
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(out + "\n")
    else:
        print(out)


def seed_sweep(args, select):
    """Verdicts must not depend on the seed: list the cells that do. A line per seed goes to
    stderr as it finishes, with a line for each of its failing cells (a sweep stopped early
    still names them); the result, as text or JSON, to stdout or ``--output``."""
    if args.seeds < 2:
        raise BadInput("--seeds needs at least 2 seeds")
    runs, per_seed = [], []
    for seed in range(args.seeds):
        start = time.perf_counter()
        m = model.evaluate(seed, args.repeat, select=select, device=args.device,
                           dtype=args.dtype, depth=args.depth, jobs=args.jobs, snippets=False)
        runs.append(model.kinds(m))
        failing = [{"row": label, "detector": detector, "message": inert(message)}
                   for label, detector, message in m.failures()]
        per_seed.append({"seed": seed, "failing_cells": len(failing), "failing": failing,
                         "seconds": round(time.perf_counter() - start, 1)})
        print(f"seed {seed}: {len(failing)} failing cells, {per_seed[-1]['seconds']} s",
              file=sys.stderr, flush=True)
        for f in failing:
            print(f"  {f['row']} × {f['detector']}: {f['message']}", file=sys.stderr, flush=True)
    flaky = [{"row": label, "detector": detector, "kinds": [r[(label, detector)] for r in runs]}
             for label, detector in model.seed_dependent(runs)]
    if args.format == "json":
        _write(args, json.dumps({"seeds": args.seeds, "depth": args.depth, "dtype": args.dtype,
                                 "rows": sorted(args.only) if args.only else "all",
                                 "commit": _describe(), "cells": len(runs[0]),
                                 "per_seed": per_seed, "seed_dependent": flaky}, indent=1))
    else:
        lines = [f"flaky: {f['row']} × {f['detector']}: {' '.join(f['kinds'])}" for f in flaky]
        _write(args, "\n".join(lines + [f"{len(runs[0])} cells × {args.seeds} seeds: "
                                         f"{len(flaky)} depend on the seed"]))
    return 1 if flaky else 0


def _describe():
    """The checkout the sweep ran in, as ``git describe`` names it (None outside git)."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None
