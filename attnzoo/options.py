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
from dataclasses import dataclass

CALL_SECONDS = 10.0  # --timeout: one call of the code under test (grade: one test)
IMPORT_SECONDS = 30.0  # --import-timeout: importing the target, torch included
WARMUP_SECONDS = 30.0  # --warmup when neither it nor --timeout is given
MAX_SECONDS = 86400.0  # a day: longer is a typo, and larger values overflow the timers
BACKENDS = ("numpy", "torch")  # what a lesson-style module's functions take
MASK_CONVENTIONS = ("keep", "drop")  # of a bool mask: True may attend, or True is masked
CAUSAL_ALIGNMENTS = ("top-left", "bottom-right")  # of is_causal when L != S

HELP = {
    "backend": "what a lesson-style module's functions take (default: inferred, numpy failing "
    "that)",
    "mask_convention": "bool mask: keep = True may attend (default); drop = True is masked",
    "causal_alignment": "how is_causal aligns when L != S (default top-left)",
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
    "deadline": "stop after this long overall and report which detectors did not run",
    "only": "run only this detector (repeatable)",
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
    causal_alignment: str = "top-left"
    unsupported: tuple = ()  # declared capabilities (detectors.kit.capabilities.VOCABULARY)
    refuses: tuple = ()  # messages with which the target refuses a call it does not support
    device: str = "cpu"
    dtype: str | None = None  # given: every call at it; None: float64, dtype detectors try all
    depth: str = "standard"
    seed: int = 0
    timeout: float | None = None  # per call; None until built, where it becomes CALL_SECONDS
    import_timeout: float = IMPORT_SECONDS
    warmup: float | None = None  # the first call of each function; built: never None
    deadline: float | None = None  # the whole run; None: none
    only: tuple = ()  # detector names, each once; (): every detector of the suite
    expect: str | None = None  # an expectations file (attnzoo.expectations)
    shrink: bool = True  # shrink each flagged case to the smallest that still fails
    follow: bool = True  # learn every case's outcome of a flagged detector: the diagnosis
    repro_dir: str | None = None  # where a reproduction script per root cause is written

    @classmethod
    def build(cls, **values):
        """Validated options from raw values (``unsupported`` may be the command line's text,
        ``only`` and ``refuses`` any iterable or None); BadInput names the first bad one."""
        raw = cls(**values)
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
        if raw.deadline is not None:
            check_seconds("--deadline", raw.deadline)
        check_device(raw.device)
        check_choices(raw)
        if raw.repro_dir is not None:
            check_repro_dir(raw.repro_dir)
        return dataclasses.replace(raw, only=only, timeout=timeout, warmup=warmup,
                                   unsupported=declared(raw.unsupported),
                                   refuses=tuple(raw.refuses or ()))

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
                                   ("--dtype", options.dtype, FLOAT_DTYPES + (None,)),
                                   ("--depth", options.depth, DEPTHS)):
        if value not in allowed:
            words = ", ".join(a for a in allowed if a is not None)
            raise BadInput(f"{option} must be one of {words}, not {value!r}")


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
