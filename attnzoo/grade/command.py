"""The command line's half of ``attnzoo grade``: check the input, grade, print, exit code."""

import argparse
import json
import os
import sys

from attnzoo import options
from attnzoo.grade import model, render
from attnzoo.grade import run as runner
from attnzoo.grade.run import Suite, SuiteError
from attnzoo.options import BadInput, Options
from attnzoo.progress import Progress
from attnzoo.sandbox import hygiene, session
from attnzoo.streams import deliver


def main(args):
    """Grade the suite at ``args.path``; bad input is one BadInput line (exit 2)."""
    if not os.path.exists(args.path):
        raise BadInput(f"no such file or folder: {args.path}: give a pytest file or a folder "
                       "of tests")
    if os.path.isfile(args.path) and not args.path.endswith(".py"):
        raise BadInput(f"{args.path} is not a .py file: give a pytest file or a folder of tests")
    if args.min_caught < 0:
        raise BadInput(f"--min-caught must be 0 or more, not {args.min_caught}")
    if args.jobs < 1:
        raise BadInput(f"--jobs must be at least 1, not {args.jobs}")
    shared = Options.build(backend=args.backend, timeout=args.timeout,  # a test is one call
                           isolation=args.isolation, memory_limit=args.memory_limit,
                           scratch_limit=args.scratch_limit)
    hygiene.install()  # attnzoo undumpable, every worker killed on every exit path
    if shared.isolation_fallback:
        print(f"attnzoo: {session.fallback_line(shared)}", file=sys.stderr)
    shown = Progress(calls=False)  # in place on a terminal, a line per row elsewhere

    def progress(label, done, total):
        shown.detector(done, total, f"{label} graded")

    try:
        doc = model.grade(Suite(args.path), shared.backend, args.jobs, shared.timeout, progress,
                          shown_as=args.path, isolation=session.isolation(shared))
    except SuiteError as e:
        raise BadInput(str(e)) from None
    finally:
        shown.done()
    unscoped = runner.unscoped()
    if unscoped:
        print(f"attnzoo: {UNSCOPED}: {unscoped}", file=sys.stderr)
    code = model.exit_code(doc, args.min_caught)
    shown = doc if args.reveal else model.hide(doc)
    isolation = dict(session.isolation_json(shared), tests=shared.isolation,
                     implementations=shared.isolation, tests_scoped=not unscoped,
                     unscoped=unscoped)
    if args.json:
        return deliver(json.dumps(dict(shown, isolation=isolation, min_caught=args.min_caught,
                                       exit_code=code), indent=1, ensure_ascii=False), code)
    report = render.text(shown, args.min_caught)
    return deliver(isolation_line(shared, unscoped) + "\n\n" + report, code)


def isolation_line(shared, unscoped):
    """The text report's first line: what every graded run and implementation's worker could
    do (check's line, said of both)."""
    line = session.isolation_words(shared).replace("isolation: ", "isolation (graded tests and "
                                                   "implementations): ", 1)
    return line + (f"; graded tests not scoped: {unscoped}" if unscoped else "")


UNSCOPED = ("graded tests were not scoped, so a test could signal or ptrace processes outside "
            "its run (the worker server, another row's run) and change a neighbour's verdict")


def add_parser(sub):
    """Register ``grade`` on the command line's subparsers."""
    p = sub.add_parser(
        "grade", help="grade your pytest tests: which zoo bugs they catch, any false alarm",
        description="Run a plain pytest suite against the reference, every decoy and every zoo "
        "bug. Tests take the implementation as the fixture `attention` (lesson contract) or "
        "`sdpa` (F.scaled_dot_product_attention's signature). Exit 0 when no correct "
        "implementation fails a test and at least --min-caught bugs are caught, else 1; 2 on "
        "bad input.")
    p.add_argument("path", help="a pytest file or a folder of tests")
    p.add_argument("--backend", choices=options.BACKENDS, default="numpy",
                   help="what `attention`'s functions take (default numpy)")
    p.add_argument("--min-caught", type=int, default=0, metavar="N",
                   help="exit 1 unless at least N bugs are caught")
    p.add_argument("--reveal", action="store_true",
                   help="name the surviving bugs (by default only their category and hint)")
    p.add_argument("--json", action="store_true", help="print the grade as JSON")
    p.add_argument("--jobs", type=int, default=2, help="implementations at once (default 2)")
    p.add_argument("--timeout", type=float, default=options.CALL_SECONDS, metavar="SECONDS",
                   help=f"time limit per test (default {options.CALL_SECONDS:g})")
    p.add_argument("--isolation", choices=options.ISOLATIONS, default=None,
                   help="what each graded pytest run and each implementation's worker may do: "
                   "strict (the default where the kernel offers Landlock and user namespaces: "
                   "it writes only to its own scratch directory, has no network and cannot "
                   "signal anything outside its own processes) or process (its own processes, "
                   "with your rights); see docs/sandbox.md")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory one graded run or worker may allocate, e.g. 512M or 16G "
                   "(default 8G); past it an allocation fails")
    p.add_argument("--scratch-limit", metavar="SIZE", help=options.HELP["scratch_limit"])
    p.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)  # always shown
    return p
