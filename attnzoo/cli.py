"""``attnzoo``: check anyone's attention against the detectors; browse and grow the zoo.

Parsing and dispatch only: each command's work lives in its room (``check``, ``catalogue``,
``show``, ``matrix``, ``gpu``, ``scaffold``, ``devtools``). Exit codes: 0 nothing flagged, 1 a
detector flagged the target, 2 bad input or usage, 3 a detector itself failed (a bug in
attnzoo, never counted as a verdict on the target), 4 ``check`` was cut short by its deadline
with nothing flagged. A verdict's code survives a closed stdout or stderr and a reader that
leaves early (``attnzoo.streams``).
"""

import argparse
import json
import os
import sys

from attnzoo import check_command, options
from attnzoo.options import BadInput
from attnzoo.sandbox import hygiene
from attnzoo.streams import deliver, reader_gone, say, standard_streams
from detectors.kit.depths import DEPTHS

EXIT_USAGE = 2


class UsageError(BadInput):
    """Bad input: one line naming what is wrong and what to do."""


class Parser(argparse.ArgumentParser):
    """argparse with one error line, like every other bad-input message of attnzoo."""

    def error(self, message):
        raise UsageError(f"{message}: see '{self.prog} --help'")


def main(argv=None):
    standard_streams()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError("no command given: try 'attnzoo check path/to/module.py', or "
                             "see 'attnzoo --help'")
        with hygiene.handlers_kept():
            return args.run(args)
    except BadInput as e:
        say(f"attnzoo: error: {e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `attnzoo list | head`: the reader has gone, and that is fine
        reader_gone()
        return 0
    except Exception:  # a fault of attnzoo itself (the target's faults are verdicts or exit 2)
        import traceback

        traceback.print_exc()
        print("attnzoo: internal error: this is a bug in attnzoo, not a verdict on the target",
              file=sys.stderr)
        return 3


def build_parser():
    parser = Parser(
        prog="attnzoo",
        description="Deliberately broken attention, and the detectors that catch every one.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    check_command.add_parser(sub).set_defaults(run=check_command.main)

    from attnzoo.grade import command as grade

    grade.add_parser(sub).set_defaults(run=cmd_grade)

    p = sub.add_parser("list", help="the catalogue: id, category, symptom, backends, and the "
                       "tier it shows at")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("show", help="one entry: metadata, lesson, diff, who catches it")
    p.add_argument("id")
    options.add_run_arguments(p, depth="entry")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("matrix", help="the kill matrix, without pytest")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    options.add_run_arguments(p, depth="quick")
    p.add_argument("--seeds", type=int, metavar="N",
                   help="run seeds 0..N-1 and report every cell whose verdict depends on the seed")
    p.add_argument("--repeat", type=int, default=1, help="draw the battery N times (cost scales)")
    p.add_argument("--only", action="append", metavar="ID", help="only rows of this entry")
    p.add_argument("--output", metavar="PATH", help="write there instead of stdout")
    p.add_argument("--jobs", type=int, default=processors(), metavar="N",
                   help="rows computed by N processes at once (default: the processors this "
                   "process may use); the cells are the same for any N")
    p.set_defaults(run=cmd_matrix)

    p = sub.add_parser("new", help="scaffold a new zoo entry to fill in")
    p.add_argument("id", help="kebab-case id, named for the mistake: softmax-over-batch")
    p.set_defaults(run=cmd_new)

    p = sub.add_parser("detectors", help="the detectors, their oracle kind and property")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_detectors)

    p = sub.add_parser("coverage", help="which detectors reach each value of the input space",
                       description="Runs every detector on the reference at each depth, reads "
                       "every call it sends for the values of reference/space.py it uses, and "
                       "prints per value how many detectors reach it forward and through "
                       "gradients. Exit 1 when a value no relation reaches at deep says no "
                       "reason, or one that says a reason is reached.")
    p.add_argument("--depth", action="append", choices=DEPTHS,
                   help="only this depth (repeatable; default all three)")
    p.add_argument("--contract", action="append", choices=("sdpa", "lesson", "varlen"),
                   help="only this contract (repeatable; default all three)")
    p.add_argument("--seed", type=int, default=0, help="seed of the case battery (default 0)")
    p.add_argument("--json", action="store_true", help="print the coverage as JSON")
    p.add_argument("--output", metavar="PATH", help="also write the JSON here")
    p.set_defaults(run=cmd_coverage)

    p = sub.add_parser("gpu", help="PyTorch's SDPA kernels on CUDA: backend × dtype × detector",
                       description="Runs the SDPA-contract detectors against each sdpa_kernel "
                       "backend in float16, bfloat16 and float32. Exits 0 with a message when "
                       "there is no GPU.")
    options.add_run_arguments(p, device="cuda", dtype=False, depth="quick")
    p.add_argument("--output", default="gpu-conformance.json", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH", help="also write the table as markdown")
    p.set_defaults(run=cmd_gpu)

    from attnzoo.devtools import commands

    commands.add(sub, options.add_run_arguments)

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
    p.add_argument("--depth", choices=DEPTHS, default="standard",
                   help="battery tier (default standard): each implementation is checked as "
                   "attnzoo check --budget checks it, the most telling units first")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="time for each implementation and dtype (default 300, varlen 900; 0 for "
                   "none): the most telling cases first, and the row says what was not reached")
    p.add_argument("--contract", choices=("sdpa", "varlen"), default="sdpa",
                   help="which contract's survey (default sdpa: survey.json and survey.md; "
                   "varlen: the adapters of attnzoo/survey/varlen_adapters, survey-varlen.json "
                   "and survey-varlen.md)")
    p.add_argument("--render-only", action="store_true",
                   help="run nothing: write survey.md again from the survey.json in --output-dir")
    p.set_defaults(run=cmd_survey)
    return parser


def cmd_grade(args):
    from attnzoo.grade import command as grade

    return grade.main(args)


# -- the catalogue -----------------------------------------------------------------------------


def cmd_list(args):
    from attnzoo import catalogue

    rows = catalogue.listing()
    print(json.dumps(rows, indent=1, ensure_ascii=False) if args.json
          else catalogue.listing_text(rows))
    return 0


def cmd_show(args):
    import zoo
    from attnzoo.options import check_device, check_seed
    from attnzoo.progress import Progress
    from attnzoo.show import show

    try:
        entry = zoo.entry(args.id)
    except KeyError:
        raise UsageError(f"no zoo entry {args.id!r}: see 'attnzoo list'") from None
    check_seed(args.seed)
    check_device(args.device)
    depth = getattr(entry.meta, "depth", "quick") if args.depth == "entry" else args.depth
    progress = Progress(calls=False)
    try:
        text, failing = show(entry, args.seed, args.device, args.dtype, depth, progress)
    finally:
        progress.done()
    return deliver(text, 1 if failing else 0)


def processors():
    """The processors this process may run on (all of them where the OS cannot say)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def cmd_matrix(args):
    from attnzoo.matrix.command import main as matrix

    return matrix(args)


def cmd_coverage(args):
    from attnzoo import coverage

    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    return coverage.command(args.depth, args.contract, args.seed, args.json, args.output)


def cmd_detectors(args):
    from attnzoo.catalogue import detectors_listing

    print(detectors_listing(args.json))
    return 0


def cmd_gpu(args):
    from attnzoo import gpu
    from attnzoo.checking import check_seed

    check_seed(args.seed)
    return gpu.run(args.device, args.output, args.markdown, args.seed, args.depth)


def cmd_survey(args):
    from attnzoo.survey.command import main as survey
    from attnzoo.survey.command import render, varlen_main, varlen_render

    varlen = args.contract == "varlen"
    if args.render_only:
        return varlen_render(args.output_dir) if varlen else render(args.output_dir)
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    if args.budget:
        options.check_seconds("--budget", args.budget)
    if varlen:
        return varlen_main(args.only, args.output_dir, args.dtype, args.seed, args.depth,
                           args.budget)
    budget = 300.0 if args.budget is None else args.budget
    return survey(args.only, args.output_dir, args.dtype, args.seed, args.depth, budget)


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
