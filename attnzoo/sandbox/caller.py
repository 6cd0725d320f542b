"""What a caller does between two calls, done where the implementation lives.

A correct implementation is a function of its arguments' values, so nothing a caller does
with the objects it passed or received may change a later answer except through those values.
Two such actions are asked for by request fields, both naming a call kept with ``keep``
(whose argument objects and answers :class:`Kept` holds):

* ``"refill"``: the call is made on the kept call's own argument objects, written in place
  with this request's values (the same tensors refilled, as a KV cache or a staging buffer
  is), instead of on new objects. A cache keyed by ``id()``, ``data_ptr()`` or the object
  itself returns the old values' answer. An argument no caller can write in place (expanded
  with stride 0) is passed anew, as a caller would expand it again.
* ``"overwrite"``: before the call, the kept call's floating-point answers are filled with
  NaN, as a caller that writes into what it received (``out.add_(residual)``) would. A
  kernel that hands out a buffer it later reads, or an answer it later returns again, lets
  the write into the next answer. An answer the caller cannot write (a read-only array, an
  expanded view) is left as it is, since no caller could have written it.
"""

from typing import NamedTuple

import numpy as np

from detectors.kit.verdict import CRASHED, ImplementationFailure


class Kept(NamedTuple):
    """One call kept as made: the objects it returned and the argument objects it was given."""

    answers: tuple
    args: list
    kwargs: dict
    pinned: bool = False  # kept to the end of the run (Request.pin)


def act(backend, request, kept, args, kwargs):
    """The (args, kwargs) to call with, after the caller's actions the request asks for."""
    if request.get("overwrite") is not None:
        for a in _kept(kept, request["overwrite"], request).answers:
            (_torch_overwrite if _is_torch(backend) else _numpy_overwrite)(backend, a)
    if request.get("refill") is None:
        return args, kwargs
    old = _kept(kept, request["refill"], request)
    args = [_refilled(backend, o, a, request) for o, a in zip(old.args, args)]
    kwargs = {k: _refilled(backend, old.kwargs.get(k), a, request) for k, a in kwargs.items()}
    return args, kwargs


def _kept(kept, handle, request):
    call = kept.get(handle) if kept is not None else None
    if call is None:  # the parent checks its handles first: only a lost worker gets here
        raise ImplementationFailure(CRASHED, f"no call kept under handle {handle}",
                                    request["call"])
    return call


def _refilled(backend, old, new, request):
    """``old`` with ``new``'s values written into it; ``new`` where there is nothing to refill
    or ``old`` cannot be written (stride 0)."""
    if not (backend.is_array(old) and backend.is_array(new)) or _overlaps(backend, old):
        return new
    if not (_torch_refill if _is_torch(backend) else _numpy_refill)(backend, old, new):
        raise ImplementationFailure(
            CRASHED, "an argument kept from an earlier call no longer has the shape and dtype "
            "it was given with (that call changed it)", request["call"])
    return old


def _overlaps(backend, a):
    """Do two elements of ``a`` share memory (an axis of stride 0)? Its shape and strides read
    through the base classes."""
    if _is_torch(backend):
        B = backend.base
        with backend.bare():
            shape, strides = B.shape.__get__(a), B.stride(a)
    else:
        a = np.ndarray.view(a, np.ndarray)
        shape, strides = a.shape, a.strides
    return any(n > 1 and s == 0 for n, s in zip(shape, strides))


def _is_torch(backend):
    return hasattr(backend, "torch")


def _numpy_overwrite(backend, a):
    """Fill a writable floating-point ndarray with NaN, through the base class."""
    a = np.ndarray.view(a, np.ndarray)
    if a.dtype.kind == "f" and a.flags.writeable:
        np.copyto(a, np.nan)


def _numpy_refill(backend, old, new):
    """Write ``new`` into ``old`` when both have one shape and dtype; False when they do not."""
    if old.shape != new.shape or old.dtype != new.dtype or not old.flags.writeable:
        return False
    np.copyto(np.ndarray.view(old, np.ndarray), new)
    return True


def _torch_overwrite(backend, t):
    """Fill a floating-point tensor with NaN through TensorBase's own methods; one that
    refuses an in-place write (an expanded view, an inference tensor) is left as it is."""
    B = backend.base
    with backend.bare(), backend.torch.no_grad():
        if not B.is_floating_point(t):
            return
        try:
            B.fill_(t, float("nan"))
        except Exception:  # noqa: BLE001 - memory no caller can write either
            pass


def _torch_refill(backend, old, new):
    """Copy ``new`` into ``old`` in place when both have one shape and dtype; False else."""
    B = backend.base
    with backend.bare(), backend.torch.no_grad():
        if (B.shape.__get__(old) != B.shape.__get__(new)
                or B.dtype.__get__(old) != B.dtype.__get__(new)):
            return False
        B.copy_(old, new)
    return True
