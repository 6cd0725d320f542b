"""``attnzoo check``'s command line: its options, and printing the report with its exit code.

What to run and the report itself are :mod:`attnzoo.check` and :mod:`attnzoo.report`.
"""

import json

from attnzoo import options
from attnzoo.options import BadInput, Options
from attnzoo.streams import deliver, say

CONTRACTS = ("sdpa", "lesson", "varlen")


def add_parser(sub):
    """Register ``check`` on the command line's subparsers."""
    p = sub.add_parser("check", help="run the detectors on your attention implementation",
                       description="Run every detector on a target: a lesson-style module "
                       "(path/to/module.py) or an SDPA-style callable (file.py:func, "
                       "package.module:func); with --contract varlen, the varlen detectors on a "
                       "callable with flash-attention's attn_varlen signature.")
    p.add_argument("target", help="path/to/module.py, path/to/file.py:func or package.module:func")
    p.add_argument("--contract", choices=CONTRACTS, default=None,
                   help="the contract to check against: sdpa, lesson (default: the one the "
                   "target's form names) or varlen (packed variable-length attention with a "
                   "paged cache, docs/varlen.md)")
    add_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--expect", metavar="FILE",
                   help="expectations file (TOML) of known failures: expected ones do not fail "
                   "the run, one that passes does")
    p.add_argument("--no-shrink", dest="shrink", action="store_false",
                   help="report a failing case as found, without looking for the smallest one")
    p.add_argument("--repro-dir", metavar="DIR", help=options.HELP["repro_dir"])
    p.add_argument("-v", "--verbose", action="store_true", help="also say why detectors are n/a")
    return p


def add_options(p):
    """What ``check`` is told besides the target: every field of :class:`Options` but follow."""
    h = options.HELP
    p.add_argument("--backend", choices=options.BACKENDS, default=None, help=h["backend"])
    p.add_argument("--mask-convention", choices=options.MASK_CONVENTIONS,
                   default=Options.mask_convention, help=h["mask_convention"])
    p.add_argument("--causal-alignment", choices=options.CAUSAL_ALIGNMENTS, default=None,
                   help=h["causal_alignment"])
    p.add_argument("--empty-rows", choices=options.ANY_EMPTY_ROWS, default=Options.empty_rows,
                   help=h["empty_rows"])
    p.add_argument("--window-counting", choices=tuple(options.WINDOW_COUNTINGS), default=None,
                   help=h["window_counting"])
    p.add_argument("--unsupported", default="", metavar="CAPABILITIES", help=h["unsupported"])
    p.add_argument("--refuses", action="append", default=[], metavar="MESSAGE",
                   help=h["refuses"])
    options.add_run_arguments(p, depth=Options.depth, scoped=True)
    for name in ("timeout", "import_timeout", "warmup", "deadline", "budget"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(Options, name),
                       metavar="SECONDS", help=h[name])
    p.add_argument("-x", "--exitfirst", action="store_true", help=h["exitfirst"])
    p.add_argument("--only", action="append", metavar="DETECTOR", help=h["only"])
    p.add_argument("--isolation", choices=options.ISOLATIONS, default=None, help=h["isolation"])
    p.add_argument("--memory-limit", metavar="SIZE", help=h["memory_limit"])
    p.add_argument("--scratch-limit", metavar="SIZE", help=h["scratch_limit"])


def main(args):
    """Run the check ``args`` describe; print the report; its exit code."""
    if args.contract == "varlen":
        from attnzoo import varlen_check

        return varlen_check.main(args)
    from attnzoo.checking import run_check
    from attnzoo.report import check_text
    from attnzoo.sandbox.session import FIRST_FLAG

    options = Options.from_args(args)
    sections, detectors, document, code = run_check(args.target, options)
    kinds = {impl["target"]["contract"] for impl in document["implementations"]}
    if args.contract is not None and kinds - {args.contract}:
        raise BadInput(f"{args.target} holds {' and '.join(sorted(kinds))} implementations, not "
                       f"{args.contract}: drop --contract, or name a {args.contract} target")
    unrun = {name for s in sections for name in s["not_run"]}
    if document["summary"]["not_run"] > len([n for s in sections for n in s["not_run"]]):
        unrun |= set(detectors)  # whole implementations the deadline left unloaded
    if document["stopped"] == FIRST_FLAG:
        pass  # --exitfirst: the report names what it left
    elif unrun and options.budget:
        say(f"attnzoo: budget spent: {options.budget:g} s passed before "
            f"{len(unrun)} detectors ran ({', '.join(sorted(unrun))}): the report is partial; "
            "raise --budget")
    elif unrun:
        given = "the --deadline" if args.deadline is not None else \
            f"the deadline (the default at --depth {options.depth})"
        say(f"attnzoo: deadline reached: {given} of {options.deadline:g} s passed before "
            f"{document['summary']['not_run']} detector runs ({', '.join(sorted(unrun))}): the "
            "report is partial; raise --deadline (0 for none) or choose detectors with --only")
    if args.json:
        out = json.dumps(document, indent=1, ensure_ascii=False)
    else:
        out = check_text(sections, detectors, options, document, args.verbose)
    return deliver(out, code)
