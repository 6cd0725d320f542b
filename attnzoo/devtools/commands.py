"""The developer tools' commands: ``docs``, ``mutants`` and ``bench``.

Their parsers are added to the command line here so that ``attnzoo.cli`` stays parsing and
dispatch of the user's commands; each handler imports its tool only when it runs (matplotlib
and mutmut are never imported for ``attnzoo check``). They work on a checkout of the project
(``project.root``).
"""

import os
import sys
import time

from attnzoo.checking import BadInput
from detectors.kit.depths import DEPTHS


def add(sub, add_run_options):
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
    p.add_argument("--check", action="store_true",
                   help="run nothing: exit 1 unless the --output file says every mutant is "
                   "killed by a detector of today's suite")
    p.set_defaults(run=cmd_mutants)

    p = sub.add_parser("bench", help="time the test run, the matrix, check and every detector",
                       description="Medians over repeated whole runs; writes JSON.")
    p.add_argument("--repeats", type=int, default=3, help="runs per figure (default 3)")
    p.add_argument("--scales", default="1,2,4", help="battery sizes to time (default 1,2,4)")
    p.add_argument("--output", metavar="PATH",
                   help="where the JSON goes (default docs/benchmark.json for the whole run; "
                   "--against, --ratio, --checks and --flagged write only where this names)")
    p.add_argument("--no-xdist-compare", action="store_true",
                   help="skip the serial-vs-parallel kill matrix comparison")
    p.add_argument("--ratio", action="store_true",
                   help="only the README's test command against the kill matrix, in turn: "
                   "their walls and the ratio (writes JSON only where --output names)")
    p.add_argument("--checks", action="store_true",
                   help="only attnzoo check on the reference and torch's SDPA at each depth "
                   "(writes JSON only where --output names)")
    p.add_argument("--against", metavar="REV",
                   help="only attnzoo matrix today against attnzoo matrix at commit REV of this "
                   "repository, in turn on this machine: walls, cells and their ratios")
    p.add_argument("--flagged", action="store_true",
                   help="only attnzoo check on the bench's flagged target (a tiled kernel with "
                   "one defect) against torch's SDPA, in turn: walls and their ratio (budget "
                   "1.5); exit 1 unless the one was flagged and the other clean")
    p.add_argument("--budgets", action="store_true",
                   help="only the order a --budget check follows (attnzoo/budget_order.json, "
                   "from the kill matrix and the detectors' time on the reference) and the "
                   "share of zoo rows a check catches within 2, 5, 10 and 30 s "
                   "(docs/benchmark-budgets.json, or --output)")
    p.add_argument("--check", metavar="LOCATOR",
                   help="with --against: attnzoo check LOCATOR (at --depth) instead of the "
                   "matrix, today and at REV, in turn")
    p.add_argument("--depth", choices=DEPTHS,
                   help="the checks' battery tier for --flagged and --against --check "
                   "(default deep)")
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("docs", help="regenerate docs/: catalogue pages, kill-matrix JSON and PNG",
                       description="Run the kill matrix (seed 0) and write docs/kill-matrix.json, "
                       "the varlen contract's (docs/kill-matrix-varlen.json), "
                       "docs/kill-matrix.png, docs/catalogue/*.md, the generated blocks of "
                       "docs/test-design.md, the lesson's grade and the gallery of generated "
                       "kernels (docs/generated-kernels.json); and fill docs/benchmarks.md "
                       "from the committed JSON of attnzoo bench, the seed sweeps, the survey "
                       "and mutants.")
    p.add_argument("--from-json", metavar="PATH",
                   help="rebuild pages and heatmap from this matrix JSON (and the committed "
                   "docs/kill-matrix-varlen.json) instead of running them")
    p.add_argument("--check", action="store_true",
                   help="exit 1 naming the files that differ from what docs/kill-matrix.json and "
                   "docs/kill-matrix-varlen.json give (runs no matrix)")
    p.add_argument("--contract", choices=("varlen",),
                   help="varlen: run only the varlen contract's matrix, write "
                   "docs/kill-matrix-varlen.json and the pages it feeds (the rest from the "
                   "committed JSON)")
    p.set_defaults(run=cmd_docs)


def cmd_mutants(args):
    from attnzoo.devtools import mutants, project

    if args.jobs < 1:
        raise BadInput("--jobs must be at least 1")
    project.root("attnzoo mutants")
    if args.check:
        if not os.path.exists(args.output):
            raise BadInput(f"no such file: {args.output}: run 'attnzoo mutants' first")
        return mutants.check(args.output)
    return mutants.main_run(args.output, args.jobs, args.log)


def cmd_bench(args):
    from attnzoo.devtools import bench, project

    try:
        scales = tuple(int(s) for s in args.scales.split(","))
    except ValueError:
        raise BadInput(f"--scales takes whole numbers like 1,2,4, not {args.scales!r}") from None
    if args.repeats < 1 or not scales or min(scales) < 1:
        raise BadInput("--repeats and --scales must be at least 1")
    if sum((bool(args.against), args.ratio, args.checks, args.flagged, args.budgets)) > 1:
        raise BadInput("--against, --ratio, --checks, --flagged and --budgets are separate "
                       "runs: give one of them")
    if args.check and not args.against:
        raise BadInput("--check names what --against compares: add --against REV")
    if args.depth and not (args.flagged or args.check):
        raise BadInput("--depth is the depth of --flagged's or --against --check's checks: add "
                       "one of them")
    root = project.root("attnzoo bench")
    if args.budgets:
        from attnzoo.devtools import budgets

        return budgets.main(args.repeats, args.output)
    if args.flagged:
        from attnzoo.devtools import flagged

        report = flagged.compare(args.repeats, args.depth or "deep")
        print(flagged.render(report))
        if args.output:
            bench.write(report, args.output)
        return 1 if report["void"] else 0
    if args.against:
        from attnzoo.devtools import against

        check = [args.check, "--depth", args.depth or "deep"] if args.check else None
        report = against.compare(args.against, args.repeats, root, check)
        print(against.render(report))
        if args.output:
            bench.write(report, args.output)
        return 0
    return bench.run(args.repeats, scales, args.output, not args.no_xdist_compare, args.ratio,
                     args.checks)


def cmd_docs(args):
    from attnzoo.devtools import bench_page, docs, gallery, grade_page, project

    root = project.root("attnzoo docs")
    if args.contract and (args.check or args.from_json):
        raise BadInput("--contract varlen runs the varlen matrix; --check and --from-json "
                       "read the committed JSONs: give one of them")
    if args.contract:
        return docs_varlen(root)
    if args.check:
        if args.from_json:
            raise BadInput("--check reads docs/kill-matrix.json; drop --from-json")
        stale = (docs.stale(root) + grade_page.stale(root) + bench_page.stale(root)
                 + gallery.stale(root))
        for path, why in stale:
            print(f"stale: {path}: {why}")
        print("docs are up to date" if not stale else
              f"{len(stale)} stale file(s): run 'attnzoo docs' (or --from-json "
              f"{docs.JSON_PATH.as_posix()} when only the zoo's text changed)")
        print(f"{docs.JSON_PATH.as_posix()}: "
              f"{docs.reproductions(docs.load(root / docs.JSON_PATH))}")
        return 1 if stale else 0
    if args.from_json:
        if not os.path.exists(args.from_json):
            raise BadInput(f"no such file: {args.from_json}")
        data = docs.normalise(docs.load(args.from_json))
        for problem in docs.coverage(data):
            print(f"warning: {args.from_json}: {problem}", file=sys.stderr)
    else:
        start = time.perf_counter()
        data = docs.run_matrix(0, progress=lambda row: print(f"  {row.label}", file=sys.stderr,
                                                              flush=True))
        print(f"kill matrix: {time.perf_counter() - start:.0f} s", file=sys.stderr)
        if (root / docs.JSON_PATH).exists():  # unchanged results keep their committed text
            data = docs.settled(docs.load(root / docs.JSON_PATH), data)
        varlen = _varlen_matrix(root)
    written = docs.write(data, root, varlen=None if args.from_json else varlen)
    if args.from_json:
        written += grade_page.write(root=root)
    else:
        written += grade_page.write(grade_page.run_grade(
            progress=lambda label, *_: print(f"  grade: {label}", file=sys.stderr, flush=True)),
            root=root)
    written += bench_page.write(root)
    if args.from_json:  # the gallery's page from its committed JSON
        written += gallery.write(root=root)
    else:
        written += gallery.write(gallery.measure(
            progress=lambda entry: print(f"  gallery: {entry}", file=sys.stderr, flush=True)),
            root=root)
    for path in written:
        print(f"wrote {path}")
    print(f"{docs.JSON_PATH.as_posix()}: {docs.reproductions(data)}")
    return 0


def _varlen_matrix(root):
    """The varlen kill matrix, run now; results unchanged since the committed JSON keep its
    text."""
    from attnzoo.devtools import docs
    from attnzoo.devtools.docs import varlen_data

    start = time.perf_counter()
    varlen = varlen_data.run(0, progress=lambda row: print(f"  varlen: {row}", file=sys.stderr,
                                                            flush=True))
    print(f"varlen kill matrix: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if (root / docs.VARLEN_JSON).exists():
        varlen = varlen_data.settle(docs.load(root / docs.VARLEN_JSON), varlen)
    return varlen


def docs_varlen(root):
    """``attnzoo docs --contract varlen``: the varlen matrix alone, its JSON and the pages."""
    from attnzoo.devtools import docs

    path = root / docs.JSON_PATH
    if not path.exists():
        raise BadInput(f"no {docs.JSON_PATH.as_posix()}: run 'attnzoo docs' first")
    for name in docs.write(docs.normalise(docs.load(path)), root, png=False,
                           varlen=_varlen_matrix(root)):
        print(f"wrote {name}")
    return 0
