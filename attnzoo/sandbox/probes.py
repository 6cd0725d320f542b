"""Calls into the implementation, run where the implementation lives.

A detector never touches the implementation directly: it sends a :class:`Request` made of NumPy
float64 arrays, and this module casts them to the target's backend, dtype and device, makes the
call, checks that an answer came back, notes whether any argument was modified, and returns the
answer as NumPy arrays with the dtype it had. The same code runs in-process (the zoo, under
pytest) and in the isolated worker (``attnzoo check``).
"""

import time
import warnings

import numpy as np

from detectors.kit.calls import ARG_NAMES, RETURNS, Result
from detectors.kit.verdict import CRASHED, ImplementationFailure


def execute(obj, target, manifest, request):
    """Run one request against a loaded target; raise ImplementationFailure on a non-answer."""
    backend = _Torch(target.device) if target.backend == "torch" else _Numpy()
    fn = _function(obj, target, manifest, request)
    args, kwargs = backend.inputs(request, target)
    before = [backend.copy(a) for a in args]
    before_kw = {k: backend.copy(v) for k, v in kwargs.items()}
    if request.seed is not None:
        backend.seed(request.seed)
    if request.gradcheck:
        return backend.gradcheck(fn, args, kwargs, request)
    if request.grad is not None:
        args = backend.requires_grad(args)
    start = time.perf_counter()
    answer = guarded(fn, args, kwargs, request)
    seconds = time.perf_counter() - start
    arrays = _unpack(answer, request, backend)
    grads = backend.grads(arrays[0], args, request) if request.grad is not None else None
    names = ARG_NAMES[request.fn]
    mutated = tuple(
        names[i] for i, (a, b) in enumerate(zip(args, before)) if not backend.same(a, b)
    ) + tuple(k for k, v in kwargs.items() if not backend.same(v, before_kw[k]))
    values = tuple(backend.to_numpy(a) for a in arrays)
    dtypes = tuple(backend.dtype_name(a) for a in arrays)
    return Result(values, dtypes, mutated, seconds, grads)


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
        raise ImplementationFailure(CRASHED, f"raised {_exception(e)}", request.describe()) from None


def _exception(e):
    if isinstance(e, SystemExit):
        return f"SystemExit (it called sys.exit({e.code!r}))"
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _function(obj, target, manifest, request):
    if request.fn == "sdpa":
        return obj
    reason = manifest.lacks(request.fn)
    if reason:
        raise ImplementationFailure(CRASHED, reason, request.describe())
    return getattr(obj, request.fn)


def _unpack(answer, request, backend):
    want = RETURNS[request.fn]
    call = request.describe()
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
        if not backend.is_numeric(item):
            raise ImplementationFailure(
                CRASHED, f"returned an array of {backend.dtype_name(item)}, not numbers", call
            )
    return items


class _Numpy:
    array_name = "a numpy.ndarray"

    def inputs(self, request, target):
        if request.dtype == "bfloat16":
            raise ImplementationFailure(CRASHED, "NumPy has no bfloat16", request.describe())
        cast = [self._cast(a, request.dtype, request.strided) for a in request.args]
        return cast, dict(request.kwargs)

    @staticmethod
    def _cast(a, dtype, strided=False):
        if not isinstance(a, np.ndarray):
            return a
        a = a.astype(dtype) if a.dtype != bool else a.copy()
        if strided and a.ndim >= 2:
            axes = (-3, -2) if a.ndim >= 3 else (-2, -1)
            a = np.ascontiguousarray(a.swapaxes(*axes)).swapaxes(*axes)
        return a

    def copy(self, a):
        return a.copy() if isinstance(a, np.ndarray) else a

    def same(self, a, b):
        if not isinstance(a, np.ndarray):
            return True
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype != bool)

    def seed(self, seed):
        np.random.seed(seed)

    def is_array(self, a):
        return isinstance(a, np.ndarray)

    def is_numeric(self, a):
        return a.dtype == bool or np.issubdtype(a.dtype, np.number)

    def to_numpy(self, a):
        """A plain ndarray (never a subclass the harness could not unpickle), floats as float64."""
        if a.dtype == bool:
            return np.array(a, dtype=bool)
        if np.issubdtype(a.dtype, np.number):
            return np.array(a, dtype=np.float64)
        return np.array(a)

    def dtype_name(self, a):
        return str(a.dtype)

    def requires_grad(self, args):
        raise ImplementationFailure(CRASHED, "NumPy has no autograd", "gradient")

    def gradcheck(self, fn, args, kwargs, request):
        raise ImplementationFailure(CRASHED, "NumPy has no autograd", "gradcheck")


class _Torch:
    array_name = "a torch.Tensor"
    threads_pinned = False

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        if not _Torch.threads_pinned:
            # The battery's tensors are tiny: a second intra-op thread only adds wake-ups, and
            # with several test workers on a small machine the spinning threads starve each other.
            torch.set_num_threads(1)
            _Torch.threads_pinned = True

    def inputs(self, request, target):
        torch = self.torch
        dtype = getattr(torch, request.dtype)
        args = [self._cast(a, dtype, request.strided) for a in request.args]
        kwargs = {}
        for k, v in request.kwargs.items():
            kwargs[k] = self._cast(v, dtype, request.strided) if isinstance(v, np.ndarray) else v
        return args, kwargs

    def _cast(self, a, dtype, strided=False):
        if not isinstance(a, np.ndarray):
            return a
        t = self.torch.from_numpy(np.array(a, copy=True))  # never share the caller's memory
        if a.dtype != bool:
            t = t.to(dtype)
        t = t.to(self.device)
        if strided and t.dim() >= 2:
            axes = (-3, -2) if t.dim() >= 3 else (-2, -1)
            t = t.transpose(*axes).contiguous().transpose(*axes)
        return t

    def copy(self, a):
        return a.detach().clone() if isinstance(a, self.torch.Tensor) else a

    def same(self, a, b):
        if not isinstance(a, self.torch.Tensor):
            return True
        a = a.detach()
        if a.shape != b.shape:
            return False
        if a.dtype == self.torch.bool:
            return bool(self.torch.equal(a, b))
        both_nan = self.torch.isnan(a) & self.torch.isnan(b)
        return bool(((a == b) | both_nan).all())

    def seed(self, seed):
        self.torch.manual_seed(seed)
        np.random.seed(seed)

    def is_array(self, a):
        return isinstance(a, self.torch.Tensor)

    def is_numeric(self, a):
        return not a.is_complex()

    def to_numpy(self, a):
        a = a.detach().to("cpu")
        if a.dtype == self.torch.bool:
            return a.numpy().copy()
        if a.is_floating_point() or a.is_complex():
            return a.to(self.torch.float64).numpy().copy()
        return a.numpy().copy()

    def dtype_name(self, a):
        return str(a.dtype).replace("torch.", "")

    def requires_grad(self, args):
        return [
            a.detach().requires_grad_(True)
            if isinstance(a, self.torch.Tensor) and a.is_floating_point()
            else a
            for a in args
        ]

    def grads(self, out, args, request):
        torch = self.torch
        names = ARG_NAMES[request.fn]
        upstream = torch.from_numpy(request.grad).to(out.dtype).to(out.device)
        if not out.requires_grad:
            return {names[i]: None for i, a in enumerate(args) if _is_float(torch, a)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (out * upstream).sum().backward()
        except Exception as e:  # noqa: BLE001 - a broken backward is the implementation's
            raise ImplementationFailure(
                CRASHED, f"backward raised {type(e).__name__}: {e}", request.describe()
            ) from None
        return {
            names[i]: None if a.grad is None else a.grad.detach().to("cpu", torch.float64).numpy()
            for i, a in enumerate(args)
            if _is_float(torch, a)
        }

    def gradcheck(self, fn, args, kwargs, request):
        torch = self.torch
        leaves = self.requires_grad(args)

        def check(*_):
            return torch.autograd.gradcheck(
                lambda *xs: _first(fn(*xs, **kwargs)), leaves, raise_exception=True
            )

        start = time.perf_counter()
        try:
            ok, message = guarded(check, (), {}, request), ""
        except ImplementationFailure as e:
            if "GradcheckError" not in e.what:
                raise
            ok, message = False, e.what.split(": ", 1)[-1]
        seconds = time.perf_counter() - start
        return Result((np.array(bool(ok)),), ("bool",), (), seconds, None, message)


def _first(answer):
    return answer[0] if isinstance(answer, (tuple, list)) else answer


def _is_float(torch, a):
    return isinstance(a, torch.Tensor) and a.is_floating_point()
