"""Calls into the implementation, run where the implementation lives.

This side only builds the inputs, makes the call and reads raw bytes back; it decides nothing.
:func:`execute` takes a decoded request (arrays already in the target's dtype, cast by the
parent) and returns a reply of plain data: every answer, and every input after the call when
the request asks (``"inputs"``), as ``{"array", "dtype", "shape"}`` plus the bytes, read
through the base storage of the array (``np.ndarray`` / ``torch.Tensor`` C methods,
torch-function and dispatch overrides disabled), so a subclass cannot choose what is read.
The parent (``attnzoo.sandbox.decide``) turns that into a Result. The same code runs
in-process (the zoo, under pytest) and in the worker.

Here: the request's course through a backend, and the kept calls. Building and reading arrays
is the backends' (:mod:`attnzoo.sandbox.numpy_backend`, :mod:`attnzoo.sandbox.torch_backend`);
making the call itself is :func:`attnzoo.sandbox.guard.guarded`.
"""

import time

from attnzoo.sandbox import caller
from attnzoo.sandbox.guard import guarded
from attnzoo.sandbox.numpy_backend import Numpy
from attnzoo.sandbox.torch_backend import Torch
from detectors.kit.calls import RETURNS
from detectors.kit.verdict import CRASHED, ImplementationFailure

KEPT = 16  # answers kept as returned (Request.keep), oldest dropped first
PINNED = 8  # answers kept to the end of the run (Request.pin), apart from those


def execute(obj, target, manifest, request, kept=None):
    """Run one decoded request against a loaded target: (reply header, buffers). With
    ``request["keep"]`` (a handle) the call, its returned objects and its argument objects, is
    kept in ``kept`` under it; ``"refill"`` and ``"overwrite"`` act on a kept call first
    (:mod:`attnzoo.sandbox.caller`)."""
    backend = _backend(target)
    fn = _function(obj, manifest, request)
    args = [backend.build(a, request) for a in request["args"]]
    kwargs = {k: backend.build(v, request) for k, v in request["kwargs"].items()}
    args, kwargs = caller.act(backend, request, kept, args, kwargs)
    if request["seed"] is not None:
        backend.seed(request["seed"])
    buffers = []
    if request["gradcheck"]:
        start = time.perf_counter()
        data = backend.gradcheck(fn, args, kwargs, request, buffers)
        return {"values": [], "inputs": [], "seconds": time.perf_counter() - start,
                "gradcheck": data}, buffers
    if request["grad"] is not None:
        args, kwargs = backend.requires_grad(args, kwargs, request)
    start, written = time.perf_counter(), []
    if request.get("guarded"):
        answer, args, kwargs, written = backend.watched(fn, args, kwargs, request)
    else:
        answer = guarded(fn, args, kwargs, request)
    seconds = time.perf_counter() - start
    items = _unpack(answer, request, backend)
    if request.get("keep") is not None and kept is not None:
        pinned = bool(request.get("pin"))  # the objects, kept; the oldest of its kind dropped
        kept[request["keep"]] = caller.Kept(items, list(args), dict(kwargs), pinned)
        same = [h for h, k in kept.items() if k.pinned == pinned]
        for handle in same[:max(0, len(same) - (PINNED if pinned else KEPT))]:
            kept.pop(handle)
    # the inputs, read back only when the request asks whether the call changed them
    arrays = [a for a in list(args) + list(kwargs.values())
              if request.get("inputs") and backend.is_array(a)]
    if request["grad"] is None:  # the answers, then the inputs, in one reading
        read = backend.read_all(list(items) + arrays, buffers, request)
        values, grads, inputs = read[:len(items)], None, read[len(items):]
    else:  # the backward runs the implementation's code: not inside a reading
        values = backend.read_all(items, buffers, request)
        later = _between(fn, backend, kwargs, request)  # held until the backward is done
        grads = backend.grads(items[0], args, kwargs, request, buffers)
        del later
        inputs = backend.read_all(arrays, buffers, request)
    return {"values": values, "inputs": inputs, "seconds": seconds, "grads": grads,
            "written": written}, buffers


def _between(fn, backend, kwargs, request):
    """The answer of the call ``request["between"]`` asks for between the forward and its
    backward: the same keywords, its own positional arguments, leaves as the first call's
    are, as a model's next layer calls the same attention before any backward."""
    if not request.get("between"):
        return None
    args = [backend.build(a, request) for a in request["between"]]
    args, _ = backend.requires_grad(args, {}, request)
    return guarded(fn, args, kwargs, request)


def reread(target, kept, handle):
    """The answers kept under ``handle`` as their storage holds them now: (reply, buffers)."""
    backend = _backend(target)
    call, buffers = kept.get(handle), []
    if call is None:
        return {"values": None}, buffers
    items = call.answers
    request = {"call": "re-reading a kept answer"}
    return {"values": backend.read_all(items, buffers, request)}, buffers


_BACKENDS = {}


def _backend(target):
    """The reading and building side for the target's array library (one per device)."""
    key = (target.backend, target.device) if target.backend == "torch" else "numpy"
    if key not in _BACKENDS:
        _BACKENDS[key] = Torch(target.device) if target.backend == "torch" else Numpy()
    return _BACKENDS[key]


def _function(obj, manifest, request):
    """The function a request calls. In a worker ``manifest`` is None: the parent decided
    what the target offers and asks only for that."""
    fn = request["fn"]
    if fn == "sdpa":
        return obj
    reason = manifest.lacks(fn) if manifest is not None else None
    f = getattr(obj, fn, None)
    if reason or not callable(f):
        raise ImplementationFailure(CRASHED, reason or f"the target has no {fn}", request["call"])
    return f


def _unpack(answer, request, backend):
    want, call = RETURNS[request["fn"]], request["call"]
    if want == 1:
        items = (answer,)
    elif isinstance(answer, (tuple, list)) and len(answer) == want:
        items = tuple(answer)
    else:
        got = f"a {type(answer).__name__}" + (
            f" of length {len(answer)}" if isinstance(answer, (tuple, list)) else ""
        )
        raise ImplementationFailure(CRASHED, f"returned {got}, not a pair (out, weights)", call)
    for item in items:
        if not backend.is_array(item):
            raise ImplementationFailure(
                CRASHED, f"returned a {type(item).__name__}, not {backend.array_name}", call
            )
    return items
