"""The options of a run of the detectors: one frozen object, validated once.

``attnzoo check``, the pytest plugin (``--attnzoo-…``) and ``attnzoo grade`` share what they
have in common: the target's conventions, the device, dtype, depth and seed, the time limits,
the detectors chosen. Each builds :class:`Options` with :meth:`Options.build`, which checks
every value and fills in the defaults that depend on another value; nothing downstream checks
or changes it again. A bad value is one :class:`BadInput` line naming the option as
``attnzoo check`` spells it (the plugin respells it as its own).

The time limits, the conventions' values and every shared option's help text live here. The
float dtypes are the contract's (``reference.FLOAT_DTYPES``) and the tiers the battery's
(``detectors.kit.depths.DEPTHS``); they are imported only where needed, so that the pytest
plugin, which loads in every pytest run, imports nothing of the project until it is asked to
check something.
"""

import dataclasses
import math
import os
import re
from dataclasses import dataclass

CALL_SECONDS = 10.0  # --timeout: one call of the code under test (grade: one test)
IMPORT_SECONDS = 30.0  # --import-timeout: importing the target, torch included
WARMUP_SECONDS = 30.0  # --warmup when neither it nor --timeout is given
MAX_SECONDS = 86400.0  # a day: longer is a typo, and larger values overflow the timers
# --deadline by depth: a hundred times or more what a clean check of torch's SDPA takes at that
# depth on a shared two-core machine (docs/benchmarks.md), so an honest slow kernel finishes,
# and a kernel that takes most of --timeout on every call is stopped with a partial report
DEADLINES = {"quick": 600.0, "standard": 1800.0, "deep": 7200.0}
BACKENDS = ("numpy", "torch")  # what a lesson-style module's functions take
MASK_CONVENTIONS = ("keep", "drop")  # of a bool mask: True may attend, or True is masked
CAUSAL_ALIGNMENTS = ("top-left", "bottom-right")  # of is_causal when L != S
# what a query row with no allowed key gives: zero weights and output (C5, PyTorch's since 2.5),
# or weight 1/S on every key and the mean of the values (a large negative fill: JAX, keras)
EMPTY_ROWS = ("zero", "uniform")
# the varlen contract's (detectors.kit.varlen.Target), spelt for a command line: a row with no
# key gives 0 with LSE -inf (V8), LSE +inf (FA2's non-split path), or attends its whole sequence
# (HF's unmask_unattended); a bounded window side counts only the keys past the query, or the
# query's own key too (HF's sliding_window)
VARLEN_EMPTY_ROWS = {"zero": "zero", "lse-inf": "lse +inf", "unmasked": "unmasked",
                     "uniform": "uniform"}
WINDOW_COUNTINGS = {"inclusive": "inclusive", "counts-current-token": "counts the current token"}
ANY_EMPTY_ROWS = tuple(dict.fromkeys(EMPTY_ROWS + tuple(VARLEN_EMPTY_ROWS)))  # either contract's
ISOLATIONS = ("strict", "process")  # attnzoo.sandbox.confine's levels
MEMORY_LIMIT = 8 << 30  # --memory-limit: what one worker may allocate
SCRATCH_LIMIT = 1 << 30  # --scratch-limit: what it may write into its scratch directory
# the least each may be: a worker with torch imported holds about 250 MiB before it runs anything
SIZE_FLOORS = {"--memory-limit": 512 << 20, "--scratch-limit": 1 << 20}
UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}  # binary: 1K is 1024 bytes

HELP = {
    "backend": "what a lesson-style module's functions take (default: inferred, numpy failing "
    "that)",
    "mask_convention": "bool mask: keep = True may attend (default); drop = True is masked",
    "causal_alignment": "how is_causal aligns when L != S (default top-left; bottom-right, "
    "the contract's, for --contract varlen)",
    "empty_rows": "what a query row with no allowed key gives: zero = zero weights and a zero "
    "output row (default, PyTorch's since 2.5); uniform = weight 1/S on each of the S keys and "
    "the mean of the values (a large negative fill, as JAX and keras); a callable may declare "
    "ATTNZOO_EMPTY_ROWS instead. With --contract varlen: zero = zero output and LSE -inf "
    "(default); lse-inf = zero output and LSE +inf (FA2's); unmasked = the row attends every key "
    "of its sequence (HF's _unmask_unattended); uniform = the mean of its sequence's values (a "
    "finite fill, HF's eager path)",
    "window_counting": "--contract varlen: what a bounded side of window_size counts: "
    "inclusive = that many keys besides the query's own (default, the contract's); "
    "counts-current-token = the query's own key among them (HF's sliding_window); a module may "
    "declare ATTNZOO_WINDOW_COUNTING instead",
    "unsupported": "what the target does not support, comma-separated from the fixed "
    "vocabulary (attnzoo check --unsupported help lists it): those cases are unsupported, "
    "never scored; a module may declare ATTNZOO_UNSUPPORTED instead",
    "refuses": "a message (or exception name) with which the target refuses a call it does not "
    "support: such a call is unsupported for that case only (repeatable; torch's 'No available "
    "kernel' always counts)",
    "device": "torch device of the torch calls: cpu, cuda, cuda:N (default %(default)s)",
    "dtype": "dtype of every call, dtype detectors' too, when given (default float64, with "
    "every dtype tried where a property is about dtypes)",
    "dtype_fixed": "dtype of every call (default float64)",
    "seed": "seed of the case battery (default 0)",
    "depth": "battery tier (default {default}): quick (the kill matrix's cases), standard (plus "
    "realistic sizes past a tile), deep (a pairwise covering array of the input space, up to "
    "1024 tokens); a bug whose page names a deeper tier survives a shallower one",
    "timeout": f"time limit per call (default {CALL_SECONDS:g})",
    "import_timeout": "time limit for importing the target, torch included (default "
    f"{IMPORT_SECONDS:g})",
    "warmup": "time limit for the first call of each function in each worker, for a compile or "
    f"cache fill (default {WARMUP_SECONDS:g}, or --timeout when that is given)",
    "deadline": "stop after this long overall and report which detectors did not run (default: "
    f"{DEADLINES['quick']:g} s at --depth quick, {DEADLINES['standard']:g} s at standard, "
    f"{DEADLINES['deep']:g} s at deep; 0 for none)",
    "budget": "a gate's time limit: run the most telling cases first (units of one detector on "
    "the cases one tier adds, up to --depth, in the order measured from the kill matrix), stop "
    "when SECONDS are spent and report what was reached",
    "exitfirst": "stop at the first flagged detector (the verdict is then known; the report "
    "names the detectors not run)",
    "only": "run only this detector (repeatable)",
    "isolation": "what the operating system lets the code under test do: strict (the default "
    "where the kernel offers Landlock and user namespaces: it writes only to its own scratch "
    "directory, has no network and cannot signal anything outside its own processes) or "
    "process (its own processes, with your rights); see docs/sandbox.md",
    "memory_limit": "memory one worker may allocate, e.g. 512M or 16G (default 8G); past it an "
    "allocation fails and the call crashes",
    "scratch_limit": "what one worker may write into its scratch directory (its TMPDIR and "
    "HOME), e.g. 100M (default 1G)",
    "repro_dir": "write one standalone reproduction script per root cause into DIR (created if "
    "its parent exists), run each once and report whether it reproduces",
}


class BadInput(Exception):
    """One line: what is wrong and what to do."""


@dataclass(frozen=True)
class Options:
    """What a run of the detectors is told; make one with :meth:`build`, never by hand."""

    backend: str | None = None  # None: inferred from a lesson module, numpy failing that
    mask_convention: str = "keep"
    causal_alignment: str | None = "top-left"  # None: the default, top-left (varlen's differs)
    empty_rows: str = "zero"  # what a row with no allowed key gives (EMPTY_ROWS; varlen's too)
    window_counting: str | None = None  # varlen only (WINDOW_COUNTINGS); None: inclusive
    unsupported: tuple = ()  # declared capabilities (detectors.kit.capabilities.VOCABULARY)
    refuses: tuple = ()  # messages with which the target refuses a call it does not support
    device: str = "cpu"
    dtype: str | None = None  # given: every call at it; None: float64, dtype detectors try all
    depth: str = "standard"
    seed: int = 0
    timeout: float | None = None  # per call; None until built, where it becomes CALL_SECONDS
    import_timeout: float = IMPORT_SECONDS
    warmup: float | None = None  # the first call of each function; built: never None
    deadline: float | None = None  # the whole run; None: the depth's default; 0: none
    budget: float | None = None  # a deadline with the telling order (attnzoo.budget); None: none
    exitfirst: bool = False  # stop after the first flagged detector
    only: tuple = ()  # detector names, each once; (): every detector of the suite
    expect: str | None = None  # an expectations file (attnzoo.expectations)
    shrink: bool = True  # shrink each flagged case to the smallest that still fails
    follow: bool = True  # learn every case's outcome of a flagged detector: the diagnosis
    isolation: str | None = None  # None: strict where the kernel allows it; built: never None
    isolation_fallback: str | None = None  # built: why the default is process, not strict
    memory_limit: int | str | None = None  # bytes, or text as "8G"; built: bytes
    scratch_limit: int | str | None = None
    repro_dir: str | None = None  # where a reproduction script per root cause is written

    @classmethod
    def build(cls, **values):
        """Validated options from raw values (``unsupported`` may be the command line's text,
        ``only`` and ``refuses`` any iterable or None); BadInput names the first bad one."""
        raw = cls(**values)
        if raw.window_counting is not None:
            raise BadInput("--window-counting is the varlen contract's: add --contract varlen, "
                           "or drop it")
        if raw.causal_alignment is None:
            raw = dataclasses.replace(raw, causal_alignment=cls.causal_alignment)
        only = known_detectors(raw.only or ())
        check_seed(raw.seed)
        # an explicit --timeout is the limit of every call, the first included, unless
        # --warmup is given too
        timeout = CALL_SECONDS if raw.timeout is None else raw.timeout
        warmup = raw.warmup
        if warmup is None:
            warmup = WARMUP_SECONDS if raw.timeout is None else raw.timeout
        check_seconds("--timeout", timeout)
        check_seconds("--import-timeout", raw.import_timeout)
        check_seconds("--warmup", warmup)
        deadline = DEADLINES.get(raw.depth) if raw.deadline is None else raw.deadline
        if deadline not in (0, None):  # None: a --depth check_choices refuses
            check_seconds("--deadline", deadline)
        if raw.budget is not None:
            if raw.deadline is not None:
                raise BadInput("--budget is the run's deadline, with the telling order: give "
                               "--budget or --deadline, not both")
            check_seconds("--budget", raw.budget)
            deadline = raw.budget
        check_device(raw.device)
        check_choices(raw)
        isolation, fallback = isolation_level(raw.isolation, raw.isolation_fallback)
        if raw.repro_dir is not None:
            check_repro_dir(raw.repro_dir)
        return dataclasses.replace(raw, only=only, timeout=timeout, warmup=warmup,
                                   deadline=deadline,
                                   unsupported=declared(raw.unsupported),
                                   refuses=tuple(raw.refuses or ()), isolation=isolation,
                                   isolation_fallback=fallback,
                                   memory_limit=size("--memory-limit", raw.memory_limit,
                                                     MEMORY_LIMIT),
                                   scratch_limit=size("--scratch-limit", raw.scratch_limit,
                                                      SCRATCH_LIMIT))

    @classmethod
    def from_args(cls, args):
        """From a parsed command line: every field it has an attribute for."""
        return cls.build(**{f.name: getattr(args, f.name)
                            for f in dataclasses.fields(cls) if hasattr(args, f.name)})


def check_choices(options):
    """Values from a fixed list (the command line's choices, for every other caller)."""
    from detectors.kit.depths import DEPTHS
    from reference import FLOAT_DTYPES

    for option, value, allowed in (("--backend", options.backend, BACKENDS + (None,)),
                                   ("--mask-convention", options.mask_convention,
                                    MASK_CONVENTIONS),
                                   ("--causal-alignment", options.causal_alignment,
                                    CAUSAL_ALIGNMENTS),
                                   ("--empty-rows", options.empty_rows, EMPTY_ROWS),
                                   ("--dtype", options.dtype, FLOAT_DTYPES + (None,)),
                                   ("--depth", options.depth, DEPTHS)):
        if value not in allowed:
            words = ", ".join(a for a in allowed if a is not None)
            raise BadInput(f"{option} must be one of {words}, not {value!r}")


def isolation_level(asked, fallback=None):
    """(level, why the default fell back to process): strict unless the kernel lacks what it
    needs, when asking for strict is bad input and the default is process, saying why."""
    if asked not in (None,) + ISOLATIONS:
        raise BadInput(f"--isolation must be one of {', '.join(ISOLATIONS)}, not {asked!r}")
    if asked == "process":
        return asked, fallback
    from attnzoo.sandbox import confine

    why = confine.unavailable()
    if why is None:
        return "strict", None
    if asked == "strict":
        raise BadInput(f"--isolation strict: {why}: use --isolation process")
    return "process", why


def size(option, value, default):
    """A size in bytes, from a number or text with a binary unit (512M, 1.5G, 64K)."""
    given = value
    if value is None:
        value = default
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", value, re.IGNORECASE)
        if not m:
            raise BadInput(f"{option} must be a size such as 512M or 8G, not {value!r}")
        value = int(float(m[1]) * 1024 ** UNITS[m[2].lower()])
    if isinstance(value, bool) or not isinstance(value, int) or value < SIZE_FLOORS[option] \
            or value >= 1 << 62:
        raise BadInput(f"{option} must be a size from {SIZE_FLOORS[option] >> 20}M, "
                       f"such as 512M or 8G, not {given!r}")
    return value
def check_repro_dir(path):
    """A folder reproductions can be written to: one that exists, or one whose parent does."""
    where = os.path.abspath(path) if path else ""
    if not path or not path.strip():
        why = "is empty"
    elif os.path.isdir(where):
        why = "" if os.access(where, os.W_OK | os.X_OK) else "is not writable"
    elif os.path.lexists(where):
        why = "exists and is not a folder"
    elif not os.path.isdir(os.path.dirname(where)):
        why = f"cannot be created: its parent {os.path.dirname(where)} is not a folder"
    else:
        why = "" if os.access(os.path.dirname(where), os.W_OK | os.X_OK) else \
            "cannot be created: its parent is not writable"
    if why:
        raise BadInput(f"--repro-dir {path!r} {why}: name a folder to write the reproductions to")


def check_seed(seed):
    """The battery's seed: 0 or more."""
    if seed < 0:
        raise BadInput(f"--seed must be 0 or more, not {seed}")


def check_seconds(option, value):
    """A time limit: a positive, finite number of seconds up to a day."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        shown = f"{value:g}" if number else repr(value)
        raise BadInput(f"{option} must be a positive number of seconds up to {MAX_SECONDS:g} "
                       f"(a day), not {shown}")


def check_device(device):
    """Refuse a device torch does not know, one this machine lacks, or one that holds no data."""
    from attnzoo.sandbox import options

    try:
        options.check_device(device)
    except options.BadOption as e:
        raise BadInput(str(e)) from None


def known_detectors(only):
    """The names given, each once, in the order given; BadInput for one no detector has."""
    if not only:
        return ()
    from detectors import by_name

    names = by_name()  # the baseline suites may be asked for by name too
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(f"unknown detector {unknown[0]!r}: see 'attnzoo detectors'")
    return tuple(dict.fromkeys(only))


def declared(unsupported):
    """The capabilities a target is declared not to support, from ``--unsupported``'s text (or
    a sequence of words); "help" lists the vocabulary."""
    from detectors.kit.capabilities import VOCABULARY, parse

    text = unsupported if isinstance(unsupported, str) else ",".join(unsupported or ())
    if text.strip() == "help":
        raise BadInput("--unsupported takes a comma-separated list of: "
                       + "; ".join(f"{k} ({v})" for k, v in VOCABULARY.items()))
    try:
        return parse(text)
    except ValueError as e:
        raise BadInput(f"--unsupported: {e}") from None


def add_run_arguments(p, device="cpu", dtype=True, seed=True, depth=None, scoped=False):
    """--device, --dtype, --seed and --depth: the same words for every command that runs
    detectors (``depth`` is that command's default tier, or None for no --depth; ``scoped``:
    a --dtype given scopes every call, and none given leaves it None)."""
    from detectors.kit.depths import DEPTHS
    from reference import FLOAT_DTYPES

    p.add_argument("--device", default=device, help=HELP["device"])
    if dtype:
        p.add_argument("--dtype", choices=FLOAT_DTYPES, default=None if scoped else "float64",
                       help=HELP["dtype" if scoped else "dtype_fixed"])
    if seed:
        p.add_argument("--seed", type=int, default=Options.seed, help=HELP["seed"])
    if depth:
        shown = "the tier the entry shows at" if depth == "entry" else depth
        p.add_argument("--depth", choices=DEPTHS, default=depth,
                       help=HELP["depth"].format(default=shown))
