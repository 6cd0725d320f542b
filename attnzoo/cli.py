"""``attnzoo``: check anyone's attention against the detectors; browse and grow the zoo.

Exit codes: 0 nothing flagged, 1 a detector flagged the target, 2 bad input or usage,
3 a detector itself failed (a bug in attnzoo, never counted as a verdict on the target).
"""

import argparse
import json
import math
import os
import sys
import time

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: one line naming what is wrong and what to do."""


class Parser(argparse.ArgumentParser):
    """argparse with one error line, like every other bad-input message of attnzoo."""

    def error(self, message):
        raise UsageError(f"{message}: see '{self.prog} --help'")


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError("no command given: try 'attnzoo check path/to/module.py', or "
                             "see 'attnzoo --help'")
        return args.run(args)
    except UsageError as e:
        print(f"attnzoo: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `attnzoo show x | head`: the reader has gone, and that is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def build_parser():
    parser = Parser(
        prog="attnzoo",
        description="Deliberately broken attention, and the detectors that catch every one.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("check", help="run the detectors on your attention implementation",
                       description="Run every detector on a target: a lesson-style module "
                       "(path/to/module.py) or an SDPA-style callable (file.py:func, "
                       "package.module:func).")
    p.add_argument("target", help="path/to/module.py, path/to/file.py:func or package.module:func")
    p.add_argument("--backend", choices=("numpy", "torch"), default=None,
                   help="what a lesson-style module's functions take (default: numpy)")
    p.add_argument("--mask-convention", choices=("keep", "drop"), default="keep",
                   help="bool mask: keep = True may attend (default); drop = True is masked")
    p.add_argument("--causal-alignment", choices=("top-left", "bottom-right"),
                   default="top-left", help="how is_causal aligns when L != S (default top-left)")
    p.add_argument("--device", default="cpu", help="torch device for torch targets (default cpu)")
    p.add_argument("--dtype", choices=("float64", "float32", "float16", "bfloat16"),
                   default="float64", help="dtype of every call (default float64)")
    p.add_argument("--seed", type=int, default=0, help="seed of the case battery (default 0)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="time limit per call (default 10)")
    p.add_argument("--only", action="append", metavar="DETECTOR",
                   help="run only this detector (repeatable)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="also say why detectors are n/a")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("list", help="the catalogue: id, category, symptom, backends")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("show", help="one entry: metadata, lesson, diff, who catches it")
    p.add_argument("id")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("matrix", help="the kill matrix, without pytest")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, metavar="N",
                   help="run seeds 0..N-1 and report every cell whose verdict depends on the seed")
    p.add_argument("--repeat", type=int, default=1, help="draw the battery N times (cost scales)")
    p.add_argument("--only", action="append", metavar="ID", help="only rows of this entry")
    p.add_argument("--output", metavar="PATH", help="write there instead of stdout")
    p.add_argument("--device", default="cpu", help="torch device for torch rows (default cpu)")
    p.add_argument("--dtype", choices=("float64", "float32", "float16", "bfloat16"),
                   default="float64", help="dtype of every call (default float64)")
    p.set_defaults(run=cmd_matrix)

    p = sub.add_parser("new", help="scaffold a new zoo entry to fill in")
    p.add_argument("id", help="kebab-case id, named for the mistake: softmax-over-batch")
    p.set_defaults(run=cmd_new)

    p = sub.add_parser("mutants", help="mutation testing of reference/: score and the "
                       "per-detector mutant matrix",
                       description="From a clean mutants/: mutmut run over reference/, the score "
                       "from mutmut export-cicd-stats (timeouts count as not killed), then every "
                       "detector against every mutant. Exit 1 unless every mutant is killed.")
    p.add_argument("--output", default="docs/mutants.json", metavar="PATH",
                   help="where to write the per-detector mutant matrix (default docs/mutants.json)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--log", default="mutmut.log", metavar="PATH",
                   help="mutmut's own output (default mutmut.log)")
    p.set_defaults(run=cmd_mutants)

    p = sub.add_parser("bench", help="time the test run, the matrix, check and every detector",
                       description="Medians over repeated whole runs; writes JSON.")
    p.add_argument("--repeats", type=int, default=3, help="runs per figure (default 3)")
    p.add_argument("--scales", default="1,2,4", help="battery sizes to time (default 1,2,4)")
    p.add_argument("--output", default="docs/benchmark.json", metavar="PATH")
    p.add_argument("--no-xdist-compare", action="store_true",
                   help="skip the serial-vs-parallel kill matrix comparison")
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("gpu", help="PyTorch's SDPA kernels on CUDA: backend × dtype × detector",
                       description="Runs the SDPA-contract detectors against each sdpa_kernel "
                       "backend in float16, bfloat16 and float32. Exits 0 with a message when "
                       "there is no GPU.")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--output", default="gpu-conformance.json", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH", help="also write the table as markdown")
    p.set_defaults(run=cmd_gpu)

    p = sub.add_parser("detectors", help="the detectors, their oracle kind and property")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_detectors)

    p = sub.add_parser("docs", help="regenerate docs/: catalogue pages, kill-matrix JSON and PNG",
                       description="Run the kill matrix (seed 0) and write docs/kill-matrix.json, "
                       "docs/kill-matrix.png, docs/catalogue/*.md and the generated blocks of "
                       "docs/test-design.md.")
    p.add_argument("--from-json", metavar="PATH",
                   help="rebuild pages and heatmap from this matrix JSON instead of running it")
    p.add_argument("--check", action="store_true",
                   help="exit 1 naming the files that differ from what docs/kill-matrix.json "
                   "gives (runs no matrix)")
    p.set_defaults(run=cmd_docs)

    p = sub.add_parser("survey", help="the detectors on installed attention libraries",
                       description="Run every installed adapter of attnzoo/survey/adapters "
                       "(pip install -e '.[survey]') at each dtype it supports; write "
                       "survey.json and survey.md.")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="only this implementation (repeatable), e.g. jax-nn")
    p.add_argument("--dtype", action="append", choices=("float32", "float64"),
                   help="only this dtype (repeatable; default every dtype it supports)")
    p.add_argument("--output-dir", default="docs", metavar="DIR",
                   help="where survey.json and survey.md go (default docs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the case battery (default 0)")
    p.set_defaults(run=cmd_survey)
    return parser


# -- check -----------------------------------------------------------------------------------


def cmd_check(args):
    from detectors import all_detectors
    from detectors.kit.battery import Battery
    from attnzoo.sandbox.executor import Isolated
    from attnzoo.report import SCHEMA, describe_target, exit_code, summarise, text
    from attnzoo.runner import run
    from detectors.kit.subject import Subject
    from attnzoo.sandbox.target import BadTarget

    chosen = all_detectors()
    if args.only:
        from detectors import by_name

        names = by_name()  # the baseline suites may be asked for by name too
        unknown = [n for n in args.only if n not in names]
        if unknown:
            raise UsageError(f"unknown detector {unknown[0]!r}: see 'attnzoo detectors'")
        chosen = [names[n] for n in dict.fromkeys(args.only)]  # each once, in the order given
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    _check_device(args.device)
    _precheck(args.target)
    battery = Battery(args.seed)
    start = time.perf_counter()
    executor = Isolated(call_seconds=args.timeout)
    sections = []
    try:
        targets = _targets(executor, args)
        for target in targets:
            executor.use(target)
            subject = Subject(target, executor, args.dtype)
            findings = [run(d, subject, battery) for d in chosen]
            sections.append({"target": describe_target(target, args.dtype, args.seed),
                             "findings": findings, "summary": summarise(findings)})
    except BadTarget as e:
        raise UsageError(str(e)) from None
    finally:
        executor.close()
    code = exit_code(sections)
    if args.json:
        doc = {
            "schema": SCHEMA,
            "command": "check",
            "target": args.target,
            "implementations": [
                {"target": s["target"], "summary": s["summary"],
                 "findings": [f.to_json() for f in s["findings"]]}
                for s in sections
            ],
            "summary": summarise([f for s in sections for f in s["findings"]]),
            "seconds": round(time.perf_counter() - start, 3),
            "exit_code": code,
        }
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        names = {d.NAME: d for d in chosen}
        print("\n\n".join(text(s, names, args.verbose) for s in sections))
    return code


def _check_device(device):
    """Refuse a device torch does not know, or a GPU this machine does not have."""
    if device == "cpu":
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"unknown --device {device!r}: use cpu, cuda or cuda:N") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA device on this machine; use --device cpu")


def _precheck(target):
    """Catch what needs no import: an empty string, a missing file, a malformed locator."""
    from attnzoo.sandbox.target import BadTarget, _split

    try:
        path, sep, attr = _split(target)
    except BadTarget as e:
        raise UsageError(str(e)) from None
    looks_like_file = path.endswith(".py") or os.sep in path
    if looks_like_file and not os.path.exists(path):
        raise UsageError(f"no such file: {path}: check the path")
    if looks_like_file and not path.endswith(".py"):
        raise UsageError(f"{path} is not a .py file: point at a Python module")


def _targets(executor, args):
    """The implementations a locator names, with the conventions the user declared."""
    from attnzoo.sandbox.target import Target

    info = executor.describe(args.target)
    declared = dict(mask_convention=args.mask_convention, causal_alignment=args.causal_alignment,
                    device=args.device)
    if info["kind"] == "zoo":
        path = args.target.split(":")[0]
        return [
            Target(f"{info['id']}/{backend}", f"{path}:{attr}",
                   "sdpa" if backend == "sdpa" else "lesson",
                   "numpy" if backend == "numpy" else "torch", **declared)
            for backend, attr in info["implementations"].items()
        ]
    if info["kind"] == "lesson":
        backend = args.backend or executor.infer_backend(args.target) or "numpy"
        return [Target(args.target, args.target, "lesson", backend, **declared)]
    if args.backend == "numpy":
        raise UsageError(f"{args.target} is a callable: SDPA-style callables take torch tensors; "
                         "drop --backend numpy")
    return [Target(args.target, args.target, "sdpa", "torch", **declared)]


# -- the catalogue ---------------------------------------------------------------------------


def cmd_list(args):
    import zoo

    rows = [
        {"id": e.id, "kind": "bug", "category": e.meta.category, "symptom": e.meta.symptom,
         "backends": list(e.backends), "title": e.meta.title}
        for e in sorted(zoo.BUGS, key=lambda e: (list(zoo.CATEGORIES).index(e.meta.category)
                                                  if e.meta.category in zoo.CATEGORIES else 99,
                                                  e.id))
    ] + [
        {"id": e.id, "kind": "decoy", "category": "correct", "symptom": "-",
         "backends": list(e.backends), "title": e.meta.title}
        for e in zoo.DECOYS
    ]
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    w = max(len(r["id"]) for r in rows)
    print(f"{'id':<{w}}  {'category':<10} {'symptom':<7} {'backends':<17} title")
    for r in rows:
        print(f"{r['id']:<{w}}  {r['category']:<10} {r['symptom']:<7} "
              f"{','.join(r['backends']):<17} {r['title']}")
    bugs = sum(1 for r in rows if r["kind"] == "bug")
    print(f"{bugs} bugs, {len(rows) - bugs} decoys")
    return 0


def cmd_show(args):
    import zoo
    from attnzoo.matrix import model as matrix
    from attnzoo.diff import entry_diff

    try:
        entry = zoo.entry(args.id)
    except KeyError:
        raise UsageError(f"no zoo entry {args.id!r}: see 'attnzoo list'") from None
    meta = entry.meta
    print(f"{meta.id}: {meta.title}")
    print(f"file:      {entry.path.relative_to(entry.path.parents[1 if entry.is_bug else 2])}")
    if entry.is_bug:
        print(f"category:  {meta.category}   symptom: {meta.symptom}   backends: "
              f"{', '.join(entry.backends)}")
        print(f"lesson:    {meta.lesson}")
        if meta.source:
            print(f"source:    {meta.source}")
        print(f"seen in:   {meta.seen_in}")
    else:
        print(f"technique: {meta.technique}\nwhy it is correct: {meta.why_correct}")
    print()
    print(entry_diff(entry))
    m = matrix.evaluate(seed=args.seed, select=lambda r: r.id == meta.id)
    print()
    for row in m.rows:
        caught = m.caught_by(row, m.detectors)
        print(f"{row.backend}: caught by {len(caught)}/{len(m.detectors)} detectors"
              + (f": {', '.join(caught)}" if caught else ""))
        for name in m.detectors:
            kind = m.kind(row, name)
            if kind in ("hit", "bonus", "crash", "miss", "false", "error"):
                print(f"  {matrix.SYMBOLS[kind][0]} {m.findings[(row.label, name)].message}")
        for name, why in getattr(meta, "gaps", {}).items():
            print(f"  - {name} cannot catch it: {why}")
    return 1 if m.failures() else 0


def cmd_matrix(args):
    from attnzoo.matrix import model as matrix

    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise UsageError(f"cannot write {args.output}: its folder does not exist")
    only = set(args.only or ())
    if only:
        import zoo

        known = {e.id for e in zoo.BUGS + zoo.DECOYS} | {"reference"}
        missing = only - known
        if missing:
            raise UsageError(f"no zoo entry {sorted(missing)[0]!r}: see 'attnzoo list'")
    select = (lambda r: r.id in only) if only else None
    _check_device(args.device)
    if args.seeds:
        return seed_sweep(args.seeds, args.repeat, select)
    m = matrix.evaluate(args.seed, args.repeat, select=select, device=args.device,
                        dtype=args.dtype)
    if args.format == "json":
        out = matrix.dumps(m)
    elif args.format == "markdown":
        out = m.render_markdown()
    else:
        out = m.render_text()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(out + "\n")
    else:
        print(out)
    return 1 if m.failures() else 0


def seed_sweep(n, repeat, select):
    """Verdicts must not depend on the seed: list the cells that do."""
    from attnzoo.matrix import model as matrix

    if n < 2:
        raise UsageError("--seeds needs at least 2 seeds")
    runs = []
    for seed in range(n):
        start = time.perf_counter()
        m = matrix.evaluate(seed, repeat, select=select)
        runs.append({key: m.kind(row, key[1]) for row in m.rows
                     for key in [(row.label, d) for d in m.detectors + m.baselines]})
        print(f"seed {seed}: {len(m.failures())} failing cells, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    flaky = sorted(k for k in runs[0] if len({r[k] for r in runs}) > 1)
    for label, detector in flaky:
        kinds = [r[(label, detector)] for r in runs]
        print(f"flaky: {label} × {detector}: {' '.join(kinds)}")
    print(f"{len(runs[0])} cells × {n} seeds: {len(flaky)} depend on the seed")
    return 1 if flaky else 0


def cmd_mutants(args):
    from attnzoo.devtools import mutants

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return mutants.main_run(args.output, args.jobs, args.log)


def cmd_bench(args):
    from attnzoo.devtools import bench

    try:
        scales = tuple(int(s) for s in args.scales.split(","))
    except ValueError:
        raise UsageError(f"--scales takes whole numbers like 1,2,4, not {args.scales!r}") from None
    if args.repeats < 1 or not scales or min(scales) < 1:
        raise UsageError("--repeats and --scales must be at least 1")
    return bench.run(args.repeats, scales, args.output, not args.no_xdist_compare)


def cmd_gpu(args):
    from attnzoo.devtools import gpu

    return gpu.run(args.device, args.output, args.markdown)


def cmd_detectors(args):
    from detectors import all_detectors, baseline_suites

    rows = [{"name": d.NAME, "oracle": d.ORACLE, "clauses": list(d.CLAUSES),
             "property": d.PROPERTY} for d in all_detectors() + baseline_suites()]
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    w = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{w}}  {r['oracle']:<13} {','.join(r['clauses']):<16} {r['property']}")
    return 0


def cmd_docs(args):
    from attnzoo.devtools import docs

    if args.check:
        if args.from_json:
            raise UsageError("--check reads docs/kill-matrix.json; drop --from-json")
        stale = docs.stale()
        for path, why in stale:
            print(f"stale: {path}: {why}")
        print("docs are up to date" if not stale else
              f"{len(stale)} stale file(s): run 'attnzoo docs' (or --from-json "
              f"{docs.JSON_PATH.as_posix()} when only the zoo's text changed)")
        return 1 if stale else 0
    if args.from_json:
        if not os.path.exists(args.from_json):
            raise UsageError(f"no such file: {args.from_json}")
        data = docs.normalise(docs.load(args.from_json))
        for problem in docs.coverage(data):
            print(f"warning: {args.from_json}: {problem}", file=sys.stderr)
        written = docs.write(data)
    else:
        start = time.perf_counter()
        data = docs.run_matrix(0, progress=lambda row: print(f"  {row.label}", file=sys.stderr,
                                                              flush=True))
        print(f"kill matrix: {time.perf_counter() - start:.0f} s", file=sys.stderr)
        written = docs.write(data)
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_survey(args):
    from attnzoo.survey.command import main as survey

    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    return survey(args.only, args.output_dir, args.dtype, args.seed)


def cmd_new(args):
    from attnzoo.scaffold import scaffold

    try:
        path = scaffold(args.id)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"created {path}: fill in BUG, make the mistake in the method and mark it '# BUG:',")
    print(f"then run: attnzoo show {args.id}   (pytest -k {args.id} fails until it is complete)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
