"""The parent's side of a call: what is sent, and what the raw reply means.

:func:`encode` casts a detector's float64 request to the target's dtype here, in the parent,
and keeps those exact bytes; :func:`decide` reads the worker's plain-data reply and makes every
decision about it: dtypes against the allow-list, conversion to float64, whether an input
changed (when the request asks: the bytes of every input after the call against the bytes
sent), gradients. Both
executors use these two functions, so the kill matrix (in-process) and ``attnzoo check`` (a
worker) cannot disagree about what an answer means.
"""

import math

import numpy as np

from attnzoo.inert import inert
from attnzoo.sandbox import gradcheck, wire
from detectors.kit.calls import ANY_INPUT, ARG_NAMES, RETURNS, Described, Result
from detectors.kit.memory import LAYOUTS
from detectors.kit.verdict import CRASHED, ImplementationFailure


def encode(request, target, words=True):
    """(header, buffers, sent): the request as plain data; ``sent`` what mutation compares.
    Without ``words`` the header's ``"call"`` is written only when read (in-process: no
    wire to cross, and a call that answers never reads it)."""
    buffers, sent = [], []
    backend = target.backend

    def arg(a, name, cast, compared=True):
        if not isinstance(a, np.ndarray):
            if a is not None and not isinstance(a, (bool, int, float)):
                raise TypeError(f"a request argument of type {type(a).__name__}")
            return {"value": a}
        data, dtype = wire.to_target(a, request.dtype if cast and a.dtype != bool else
                                     ("bool" if a.dtype == bool else "float64"), backend)
        buffers.append(data)
        desc = {"array": len(buffers) - 1, "dtype": dtype, "shape": list(a.shape)}
        if compared:
            sent.append((name, desc, len(buffers) - 1))
        return desc

    names = ARG_NAMES[request.fn]
    args = [arg(a, names[i], True) for i, a in enumerate(request.args)]
    kwargs = {k: arg(v, k, backend == "torch") for k, v in request.kwargs.items()}
    between = None
    if request.between is not None:
        if request.grad is None or request.gradcheck or request.guarded:
            raise ValueError("a call between a forward and its backward needs a plain backward "
                             "(grad, without gradcheck or guarded)")
        between = [arg(a, names[i], True, compared=False) for i, a in enumerate(request.between)]
    grad = None
    if request.grad is not None:
        buffers.append(np.ascontiguousarray(request.grad, dtype="<f8"))
        grad = {"array": len(buffers) - 1, "dtype": "float64",
                "shape": list(np.shape(request.grad))}
    if request.grad_layout not in (None,) + LAYOUTS:
        raise ValueError(f"an upstream gradient laid out {request.grad_layout!r}")
    if request.guarded and not request.inputs:
        raise ValueError("a guarded request reads its inputs back as well (inputs=True)")
    if request.layout not in LAYOUTS:
        raise ValueError(f"arguments laid out {request.layout!r}")
    header = {"fn": request.fn, "args": args, "kwargs": kwargs, "grad": grad,
              "grad_layout": request.grad_layout,
              "wrt": None if request.wrt is None else list(request.wrt),
              "gradcheck": bool(request.gradcheck), "seed": request.seed,
              "layout": request.layout, "keep": None, "inputs": bool(request.inputs),
              "guarded": bool(request.guarded),
              "refill": request.refill, "overwrite": request.overwrite, "between": between,
              "call": request.describe() if words else Described(request)}
    # the arrays' own bytes, not copies: nothing writes to them before the answer is decided
    return header, [memoryview(b).cast("B") for b in buffers], sent


def for_worker(header, buffers):
    """The worker's view of an encoded request: each array description gets its bytes."""
    def attach(desc):
        if desc is None or "array" not in desc:
            return desc
        return dict(desc, bytes=buffers[desc["array"]])

    request = dict(header)
    request["args"] = [attach(a) for a in header["args"]]
    request["kwargs"] = {k: attach(v) for k, v in header["kwargs"].items()}
    if header.get("between") is not None:
        request["between"] = [attach(a) for a in header["between"]]
    grad = header.get("grad")
    if grad is not None:
        request["grad"] = np.frombuffer(buffers[grad["array"]], "<f8").reshape(grad["shape"]).copy()
    return request


def decide(reply, buffers, sent, sent_buffers, request, target):
    """A Result from a reply the worker sent, trusting nothing in it."""
    try:
        return _decide(reply, buffers, sent, sent_buffers, request, target)
    except wire.NotNumbers as e:
        raise ImplementationFailure(
            CRASHED, f"returned an array of {e.name}, not numbers", request.describe()) from None
    except (wire.Malformed, KeyError, TypeError, ValueError, AttributeError, IndexError,
            OverflowError, RecursionError) as e:
        raise ImplementationFailure(CRASHED, unreadable(e), request.describe()) from None


def unreadable(e):
    """Why a reply could not be read, in a line of bounded length: the exception's text can
    quote what the worker sent."""
    return inert(f"sent a reply attnzoo cannot read ({type(e).__name__}: {str(e)[:300]})")


def _decide(reply, buffers, sent, sent_buffers, request, target):
    want = 0 if request.gradcheck else RETURNS[request.fn]
    values = reply["values"]
    if not isinstance(values, list) or len(values) != want:
        raise wire.Malformed(f"{len(values)} answers where {want} were due")
    seconds = reply["seconds"]
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise wire.Malformed(f"a call time of {seconds!r}")
    if request.gradcheck:  # the differentiable inputs: the float arguments, in order
        shapes = [list(a.shape) for a in request.args
                  if isinstance(a, np.ndarray) and a.dtype != bool]
        ok, message = gradcheck.decide(reply["gradcheck"], buffers, shapes, request.describe())
        return Result((np.array(ok),), ("bool",), (), seconds, None, message)
    arrays = [wire.array(v, buffers) for v in values]
    out = tuple(_as_answer(a, name, target.backend) for a, name in arrays)
    dtypes = tuple(name for _, name in arrays)
    mutated = _mutated(reply["inputs"], buffers, sent, sent_buffers) if request.inputs else None
    if request.guarded:  # written and put back: as changed as what stayed changed
        mutated = tuple(dict.fromkeys(mutated + _written(reply.get("written"), sent)))
    return Result(out, dtypes, mutated, seconds, _grads(reply.get("grads"), buffers, request))


def _as_answer(a, name, backend):
    """Floats as float64, bools as bool; integers as float64 (NumPy) or kept (torch). ``a`` is
    :func:`wire.array`'s own copy: converted where its dtype is another, never copied again."""
    if name == "bool":
        return np.asarray(a, dtype=bool)
    if name in wire.FLOATS or backend == "numpy":
        return np.asarray(a, dtype=np.float64)
    return a


def _mutated(inputs, buffers, sent, sent_buffers):
    """Names of the inputs whose bytes after the call differ from those sent."""
    if not isinstance(inputs, list) or len(inputs) != len(sent):
        raise wire.Malformed(f"{len(inputs)} inputs read back where {len(sent)} were sent")
    changed = []
    for after, (name, desc, i) in zip(inputs, sent):
        if _same_bytes(after, buffers, desc, sent_buffers[i]):
            continue  # byte for byte what was sent: unchanged, no need to rebuild it
        before, _ = wire.array(desc, sent_buffers)
        try:
            now, now_name = wire.array(after, buffers)
        except (wire.Malformed, wire.NotNumbers):
            changed.append(name)  # its storage now holds something that is not its data
            continue
        equal = now_name == desc["dtype"] and now.shape == before.shape and np.array_equal(
            now, before, equal_nan=before.dtype != bool)
        if not equal:
            changed.append(name)
    return tuple(changed)


def _written(written, sent):
    """The inputs a guarded call wrote into, as the worker names them: sent names only."""
    names = [name for name, _, _ in sent]
    if not isinstance(written, list) or not all(w in names or w == ANY_INPUT for w in written):
        raise wire.Malformed("written inputs that were not sent")
    return tuple(written)


def _same_bytes(after, buffers, desc, sent):
    return (isinstance(after, dict) and after.get("dtype") == desc["dtype"]
            and after.get("shape") == desc["shape"] and type(after.get("array")) is int
            and 0 <= after["array"] < len(buffers) and _equal(buffers[after["array"]], sent))


def _equal(a, b):
    """Byte for byte, at memcmp's speed (a memoryview's own == compares byte by byte)."""
    return len(a) == len(b) and np.array_equal(np.frombuffer(a, np.uint8),
                                               np.frombuffer(b, np.uint8))


def _grads(grads, buffers, request):
    if request.grad is None:
        return None
    names = ARG_NAMES[request.fn] + tuple(request.kwargs)
    if not isinstance(grads, dict) or not set(grads) <= set(names):
        raise wire.Malformed("gradients for arguments the call does not have")
    return {n: None if g is None else np.asarray(wire.array(g, buffers)[0], dtype=np.float64)
            for n, g in grads.items()}


def reread(reply, buffers, handle, target):
    """The answers kept under ``handle``, read again now: (values as in a Result, dtype names)."""
    try:
        values = reply["values"]
        if not isinstance(values, list):
            raise wire.Malformed(f"no answers kept under handle {handle}")
        arrays = [wire.array(v, buffers) for v in values]
    except wire.NotNumbers as e:
        raise ImplementationFailure(
            CRASHED, f"a kept answer now holds {e.name}, not numbers", "re-reading") from None
    except (wire.Malformed, KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ImplementationFailure(CRASHED, unreadable(e), "re-reading a kept answer") from None
    return (tuple(_as_answer(a, name, target.backend) for a, name in arrays),
            tuple(name for _, name in arrays))
