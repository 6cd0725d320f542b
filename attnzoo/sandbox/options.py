"""The sandbox's options of ``attnzoo check``, checked before anything is imported or run.

Each bad value or combination is one line naming what is wrong and what to do (the command
line prints it and exits 2). Metadata as data: the limits every time option obeys.
"""

import math

CALL_SECONDS = 10.0  # --timeout when not given
WARMUP_SECONDS = 30.0  # --warmup when neither it nor --timeout is given
MAX_SECONDS = 86400.0  # a day: longer is a typo, and larger values overflow the timers
TIME_OPTIONS = (  # (attribute, option, may be absent)
    ("timeout", "--timeout", False),
    ("import_timeout", "--import-timeout", False),
    ("warmup", "--warmup", True),
    ("deadline", "--deadline", True),
)


class BadOption(ValueError):
    """An option value or combination that cannot work: one line, what to do."""


def add_arguments(p):
    """The sandbox's time options on the ``check`` parser."""
    p.add_argument("--import-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="time limit for importing the target, torch included (default 30)")
    p.add_argument("--warmup", type=float, default=None, metavar="SECONDS",
                   help="time limit for the first call of each function in each worker, for a "
                   f"compile or cache fill (default {WARMUP_SECONDS:g}, or --timeout when "
                   "that is given)")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="stop after this long overall and report which detectors did not run")


def validate(args):
    """Raise BadOption for a time limit out of range or a device that holds no data.

    Fills in the defaults that depend on each other: an explicit --timeout is the limit of
    every call, the first included, unless --warmup is given too.
    """
    if args.warmup is None:
        args.warmup = WARMUP_SECONDS if args.timeout is None else args.timeout
    if args.timeout is None:
        args.timeout = CALL_SECONDS
    for attr, option, optional in TIME_OPTIONS:
        value = getattr(args, attr, None)
        if value is None and optional:
            continue
        if value is None or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
            raise BadOption(f"{option} must be a positive number of seconds up to "
                            f"{MAX_SECONDS:g} (a day), not {value:g}")
    check_device(args.device)


def check_device(device):
    """A device must hold data attnzoo can read back; meta tensors have shapes but no values."""
    if device == "cpu":
        return
    import torch  # only for a device other than the CPU: --device cpu needs no torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise BadOption(f"unknown --device {device!r}: use cpu, cuda or cuda:N") from None
    if parsed.type == "meta":
        raise BadOption("--device meta holds no values for the detectors to compare: use "
                        "--device cpu or cuda")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise BadOption(f"--device {device}: no CUDA device on this machine; use --device cpu")
    try:
        torch.zeros(1, device=parsed).cpu()
    except Exception as e:  # noqa: BLE001 - any failure means the device is unusable here
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise BadOption(f"--device {device} cannot be used here ({first}): use --device cpu"
                        ) from None


def check_targets(targets, dtype):
    """Combinations known to test nothing: bfloat16 on a NumPy implementation."""
    for target in targets:
        if target.backend == "numpy" and dtype == "bfloat16":
            raise BadOption(f"--dtype bfloat16: {target.name} is a NumPy implementation and "
                            "NumPy has no bfloat16: use --dtype float16, float32 or float64 "
                            "(or --backend torch for a torch module)")
