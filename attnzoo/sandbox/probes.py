"""Calls into the implementation, run where the implementation lives.

This side only builds the inputs, makes the call and reads raw bytes back; it decides nothing.
:func:`execute` takes a decoded request (arrays already in the target's dtype, cast by the
parent) and returns a reply of plain data: every answer, and every input after the call when
the request asks (``"inputs"``), as ``{"array", "dtype", "shape"}`` plus the bytes, read
through the base storage of the array (``np.ndarray`` / ``torch.Tensor`` C methods,
torch-function and dispatch overrides disabled), so a subclass cannot choose what is read.
The parent (``attnzoo.sandbox.decide``) turns that into a Result. The same code runs
in-process (the zoo, under pytest) and in the worker.
"""

import contextlib
import time
import warnings

import numpy as np

from attnzoo.sandbox import caller, gradcheck
from detectors.kit.calls import ANY_INPUT, ARG_NAMES, RETURNS
from detectors.kit.memory import laid_out, laid_out_array
from detectors.kit.verdict import CRASHED, ImplementationFailure

_ndarray_view = np.ndarray.view
_ndarray_tobytes = np.ndarray.tobytes


class CallTimeout(BaseException):
    """Raised into a call that ran past its time limit (in-process execution)."""


KEPT = 16  # answers kept as returned (Request.keep), oldest dropped first


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
        kept[request["keep"]] = caller.Kept(items, list(args), dict(kwargs))  # the objects
        while len(kept) > KEPT:
            kept.pop(next(iter(kept)))
    # the inputs, read back only when the request asks whether the call changed them
    arrays = [a for a in list(args) + list(kwargs.values())
              if request.get("inputs") and backend.is_array(a)]
    if request["grad"] is None:  # the answers, then the inputs, in one reading
        read = backend.read_all(list(items) + arrays, buffers, request)
        values, grads, inputs = read[:len(items)], None, read[len(items):]
    else:  # the backward runs the implementation's code: not inside a reading
        values = backend.read_all(items, buffers, request)
        grads = backend.grads(items[0], args, kwargs, request, buffers)
        inputs = backend.read_all(arrays, buffers, request)
    return {"values": values, "inputs": inputs, "seconds": seconds, "grads": grads,
            "written": written}, buffers


def _named_arrays(backend, args, kwargs, request):
    """(name, array) of every array argument, by the contract's names."""
    named = list(zip(ARG_NAMES[request["fn"]], args)) + list(kwargs.items())
    return [(n, a) for n, a in named if backend.is_array(a)]


def _built(backend, request):
    """The request's arguments built again, as new arrays."""
    return ([backend.build(a, request) for a in request["args"]],
            {k: backend.build(v, request) for k, v in request["kwargs"].items()})


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
        _BACKENDS[key] = _Torch(target.device) if target.backend == "torch" else _Numpy()
    return _BACKENDS[key]


def guarded(fn, args, kwargs, request):
    """Call the implementation; whatever it raises, sys.exit included, becomes a crash."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except CallTimeout:
        raise
    except BaseException as e:  # noqa: BLE001 - the implementation's failure, not ours
        raise ImplementationFailure(CRASHED, f"raised {_exception(e)}", request["call"]) from None


def _exception(e):
    if isinstance(e, SystemExit):
        return f"SystemExit (it called sys.exit({e.code!r}))"
    try:
        text = str(e).strip().splitlines()
    except BaseException:  # noqa: BLE001 - an exception whose __str__ fails is still a crash
        text = []
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


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


def _plain(a, buffers):
    """A plain little-endian ndarray's description, its bytes queued in ``buffers``."""
    dtype = a.dtype
    if dtype.kind not in "biuf":
        return {"dtype": str(dtype), "shape": list(a.shape)}
    a = a.astype(dtype.newbyteorder("<"), copy=False)
    buffers.append(_ndarray_tobytes(a, order="C"))
    return {"array": len(buffers) - 1, "dtype": dtype.name, "shape": list(a.shape)}


def _numpy_input(desc):
    """A writable ndarray from a decoded request argument (bytes, dtype name, shape)."""
    data, name, shape = desc["bytes"], desc["dtype"], desc["shape"]
    return np.frombuffer(data, dtype=np.dtype(name).newbyteorder("<")).reshape(shape) \
        .astype(name)


class _Numpy:
    array_name = "a numpy.ndarray"

    def build(self, desc, request):
        if "value" in desc:
            return desc["value"]
        return laid_out_array(_numpy_input(desc), request["layout"])

    def seed(self, seed):
        np.random.seed(seed)

    def is_array(self, a):
        return isinstance(a, np.ndarray)

    def read(self, a, buffers, request):
        """The bytes in the array's own memory, whatever its class claims."""
        return _plain(_ndarray_view(a, np.ndarray), buffers)

    def read_all(self, arrays, buffers, request):
        return [self.read(a, buffers, request) for a in arrays]

    def requires_grad(self, args, kwargs, request):
        raise ImplementationFailure(CRASHED, "NumPy has no autograd", "gradient")

    def watched(self, fn, args, kwargs, request):
        """The call with every array argument read-only: (answer, args, kwargs, the names of
        those it writes into). Only when that raises is each input tried read-only alone, to
        name it, and the call made once more with writable inputs for its answer (a raise
        there is the call's own)."""
        for _, a in _named_arrays(self, args, kwargs, request):
            a.flags.writeable = False
        try:
            return guarded(fn, args, kwargs, request), args, kwargs, []
        except ImplementationFailure:
            pass
        written = []
        for name, _ in _named_arrays(self, args, kwargs, request):
            again, again_kw = _built(self, request)
            dict(_named_arrays(self, again, again_kw, request))[name].flags.writeable = False
            try:
                guarded(fn, again, again_kw, request)
            except ImplementationFailure:
                written.append(name)
        args, kwargs = _built(self, request)
        return guarded(fn, args, kwargs, request), args, kwargs, written or [ANY_INPUT]

    def gradcheck(self, fn, args, kwargs, request, buffers):
        raise ImplementationFailure(CRASHED, "NumPy has no autograd", "gradcheck")


class _Torch:
    array_name = "a torch.Tensor"
    threads_pinned = False

    def __init__(self, device):
        import torch  # only for a torch target: a numpy one never imports torch

        self.torch = torch
        self.base = torch._C.TensorBase
        self.device = device
        if not _Torch.threads_pinned:
            # The battery's tensors are tiny: a second intra-op thread only adds wake-ups, and
            # with several test workers on a small machine the spinning threads starve each other.
            torch.set_num_threads(1)
            _Torch.threads_pinned = True

    def build(self, desc, request):
        if "value" in desc:
            return desc["value"]
        torch, name = self.torch, desc["dtype"]
        if name == "bfloat16":
            raw = np.frombuffer(desc["bytes"], dtype="<i2").reshape(desc["shape"]).copy()
            t = torch.from_numpy(raw).view(torch.bfloat16)
        else:
            t = torch.from_numpy(_numpy_input(desc))
        if self.device != "cpu":  # from_numpy is on the CPU already
            t = t.to(self.device)
        return laid_out(t, request["layout"])

    def seed(self, seed):
        if self.device == "cpu":  # manual_seed also queues a seed for every accelerator kind
            self.torch.default_generator.manual_seed(seed)
        else:
            self.torch.manual_seed(seed)
        np.random.seed(seed)

    def is_array(self, a):
        return isinstance(a, self.torch.Tensor)

    @contextlib.contextmanager
    def bare(self):
        """No __torch_function__ (subclass or mode) and no Python dispatch while reading."""
        C = self.torch._C
        no_dispatch = getattr(C, "_DisableTorchDispatch", contextlib.nullcontext)
        with C.DisableTorchFunction(), no_dispatch():
            yield

    def read(self, a, buffers, request):
        """The tensor's storage, read with TensorBase's C methods, never the object's own."""
        return self.read_all((a,), buffers, request)[0]

    def read_all(self, tensors, buffers, request):
        """:meth:`_read` of each tensor, all under one :meth:`bare` (entering it is most of
        the cost of reading the battery's small answers)."""
        with self.bare():
            return [self._read(a, buffers, request) for a in tensors]

    def _read(self, a, buffers, request):
        torch, B = self.torch, self.base
        try:
            t = B.contiguous(B.to(B.detach(a), "cpu"))
            name = str(B.dtype.__get__(t)).removeprefix("torch.")
            if name in ("float16", "bfloat16"):
                t = B.view(t, torch.int16)
            elif name == "bool":
                t = B.view(t, torch.uint8)
            elif B.is_complex(t) or B.is_quantized.__get__(t) or name not in _READABLE:
                return {"dtype": name, "shape": list(B.shape.__get__(t))}
            shape = list(B.shape.__get__(t))
            # tobytes copies; resolve_neg materialises a lazily negated view (numpy() refuses
            # one) and is the tensor itself otherwise
            raw = _ndarray_tobytes(B.numpy(B.resolve_neg(t)), order="C")
        except Exception as e:  # noqa: BLE001 - storage that cannot be read is no answer
            raise ImplementationFailure(
                CRASHED, f"returned a tensor whose data cannot be read ({_exception(e)})",
                request["call"]) from None
        buffers.append(raw)
        return {"array": len(buffers) - 1, "dtype": name, "shape": shape}

    def requires_grad(self, args, kwargs, request):
        """The arguments as leaves: those named by ``request["wrt"]`` require grad (every float
        positional argument when it names none)."""
        torch, wrt = self.torch, request.get("wrt")
        names = ARG_NAMES[request["fn"]]

        def leaf(name, a, positional):
            wanted = positional if wrt is None else name in wrt
            return a.detach().requires_grad_(True) if wanted and _is_float(torch, a) else a

        return ([leaf(n, a, True) for n, a in zip(names, args)],
                {k: leaf(k, v, False) for k, v in kwargs.items()})

    def watched(self, fn, args, kwargs, request):
        """The call, and the names of the tensor arguments whose version counter it moved:
        every in-place write counts, even one put back before returning."""
        version = self.base._version.__get__
        named = _named_arrays(self, args, kwargs, request)
        before = [version(a) for _, a in named]
        answer = guarded(fn, args, kwargs, request)
        return answer, args, kwargs, [n for (n, a), v in zip(named, before) if version(a) != v]

    def grads(self, out, args, kwargs, request, buffers):
        """Every float argument's gradient (None where none reached it) after the backward of
        sum(out * grad), or of out with ``grad`` laid out as ``request["grad_layout"]`` says."""
        torch, B = self.torch, self.base
        names, wrt = ARG_NAMES[request["fn"]], request.get("wrt") or ()
        floats = [(n, a) for n, a in zip(names, args) if _is_float(torch, a)]
        floats += [(k, v) for k, v in kwargs.items() if k in wrt and _is_float(torch, v)]
        with self.bare():
            if not B.requires_grad.__get__(out):
                return {n: None for n, _ in floats}
            upstream = torch.from_numpy(request["grad"]).to(B.dtype.__get__(out))
            upstream = upstream.to(B.device.__get__(out))
            layout = request.get("grad_layout")
            if layout is None:
                loss, upstream = torch.sum(torch.mul(out, upstream)), None
            else:  # built after the cast: .to would make a strided tensor contiguous again
                loss, upstream = out, laid_out(upstream, layout)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loss.backward(upstream)
        except Exception as e:  # noqa: BLE001 - a broken backward is the implementation's
            raise ImplementationFailure(
                CRASHED, f"backward raised {_exception(e)}", request["call"]) from None
        return {n: None if a.grad is None else self.read(a.grad, buffers, request)
                for n, a in floats}

    def gradcheck(self, fn, args, kwargs, request, buffers):
        """What torch.autograd.gradcheck would compute, as raw data (attnzoo.sandbox.gradcheck
        decides in the parent)."""
        return gradcheck.collect(self, fn, args, kwargs, request, buffers, _exception,
                                 CallTimeout)


_READABLE = ("float64", "float32", "int8", "int16", "int32", "int64", "uint8", "uint16",
             "uint32", "uint64")


def _is_float(torch, a):
    return isinstance(a, torch.Tensor) and a.is_floating_point()
