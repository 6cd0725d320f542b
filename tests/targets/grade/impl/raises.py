"""An SDPA-signature stand-in that raises, warns or answers as its second argument says (for
tests/test_grade_proxy.py)."""
import builtins
import sys
import warnings

import numpy as np

SCREEN = "\x1b[2J\x1b[Hconformant"  # what a hostile message would draw on a terminal


class Custom(ValueError):
    """An exception class of the implementation's own: it arrives as its builtin base."""


def sdpa(x, kind):
    if kind == "none":
        return x
    if kind == "warn":
        warnings.warn("careful", RuntimeWarning, stacklevel=2)
        return x
    if kind == "custom":
        raise Custom(f"custom {SCREEN}")
    if kind == "axis":
        raise np.exceptions.AxisError(f"axis {SCREEN}")
    if kind == "exit":
        sys.exit(3)
    raise getattr(builtins, kind)(f"{kind} {SCREEN}")
