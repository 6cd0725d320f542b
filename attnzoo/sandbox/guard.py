"""The implementation's call, made so that whatever it raises becomes a crash.

Both array backends (:mod:`attnzoo.sandbox.numpy_backend`, :mod:`attnzoo.sandbox.torch_backend`)
and :mod:`attnzoo.sandbox.probes` call the implementation through :func:`guarded` and word its
exceptions with :func:`describe`; :class:`CallTimeout` is the one exception that passes through.
"""

import warnings

import numpy as np

from detectors.kit.verdict import CRASHED, ImplementationFailure


class CallTimeout(BaseException):
    """Raised into a call that ran past its time limit (in-process execution)."""


def guarded(fn, args, kwargs, request):
    """Call the implementation; whatever it raises, sys.exit included, becomes a crash."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except CallTimeout:
        raise
    except BaseException as e:  # noqa: BLE001 - the implementation's failure, not ours
        raise ImplementationFailure(CRASHED, f"raised {describe(e)}", request["call"]) from None


def describe(e):
    """An exception the implementation raised, in words: its type and the first line of its
    message (a SystemExit says so, with its code)."""
    if isinstance(e, SystemExit):
        return f"SystemExit (it called sys.exit({e.code!r}))"
    try:
        text = str(e).strip().splitlines()
    except BaseException:  # noqa: BLE001 - an exception whose __str__ fails is still a crash
        text = []
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
