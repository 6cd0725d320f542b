"""The torch side of a call in the implementation's process: building its tensors, reading its
answers and gradients as raw bytes, and watching which inputs it writes into.

:class:`Torch` is one of the two array backends :mod:`attnzoo.sandbox.probes` drives (the other
is :mod:`attnzoo.sandbox.numpy_backend`). A tensor is read through ``torch._C.TensorBase``'s C
methods with torch-function and dispatch overrides disabled, so a subclass cannot choose what is
read. torch is imported only when a torch target needs this backend.
"""

import contextlib
import warnings

import numpy as np

from attnzoo.sandbox import gradcheck
from attnzoo.sandbox.guard import CallTimeout, describe, guarded
from attnzoo.sandbox.numpy_backend import named_arrays, numpy_input
from detectors.kit.calls import ARG_NAMES
from detectors.kit.memory import laid_out
from detectors.kit.verdict import CRASHED, ImplementationFailure

_ndarray_tobytes = np.ndarray.tobytes
_READABLE = ("float64", "float32", "int8", "int16", "int32", "int64", "uint8", "uint16",
             "uint32", "uint64")


class Torch:
    array_name = "a torch.Tensor"
    threads_pinned = False

    def __init__(self, device):
        import torch  # only for a torch target: a numpy one never imports torch

        self.torch = torch
        self.base = torch._C.TensorBase
        self.cpu = torch.device("cpu")
        self.device = device
        if not Torch.threads_pinned:
            # The battery's tensors are tiny: a second intra-op thread only adds wake-ups, and
            # with several test workers on a small machine the spinning threads starve each other.
            torch.set_num_threads(1)
            Torch.threads_pinned = True

    def build(self, desc, request):
        if "value" in desc:
            return desc["value"]
        torch, name = self.torch, desc["dtype"]
        if name == "bfloat16":
            raw = np.frombuffer(desc["bytes"], dtype="<i2").reshape(desc["shape"]).copy()
            t = torch.from_numpy(raw).view(torch.bfloat16)
        else:
            t = torch.from_numpy(numpy_input(desc))
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

    def bare(self):
        """No __torch_function__ (subclass or mode) and no Python dispatch while reading."""
        return _Bare(self.torch._C)

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
            t = B.contiguous(B.to(B.detach(a), self.cpu))
            dtype = B.dtype.__get__(t)
            name = _NAMES.get(dtype) or _name(dtype)
            if name in ("float16", "bfloat16"):
                t = B.view(t, torch.int16)
            elif name == "bool":
                t = B.view(t, torch.uint8)
            elif name not in _READABLE:  # complex and quantized dtypes among them
                return {"dtype": name, "shape": list(B.shape.__get__(t))}
            shape = list(B.shape.__get__(t))
            # tobytes copies; resolve_neg materialises a lazily negated view (numpy() refuses
            # one) and is the tensor itself otherwise
            raw = _ndarray_tobytes(B.numpy(B.resolve_neg(t)), order="C")
        except Exception as e:  # noqa: BLE001 - storage that cannot be read is no answer
            raise ImplementationFailure(
                CRASHED, f"returned a tensor whose data cannot be read ({describe(e)})",
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
        named = named_arrays(self, args, kwargs, request)
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
                CRASHED, f"backward raised {describe(e)}", request["call"]) from None
        return {n: None if a.grad is None else self.read(a.grad, buffers, request)
                for n, a in floats}

    def gradcheck(self, fn, args, kwargs, request, buffers):
        """What torch.autograd.gradcheck would compute, as raw data (attnzoo.sandbox.gradcheck
        decides in the parent)."""
        return gradcheck.collect(self, fn, args, kwargs, request, buffers, describe,
                                 CallTimeout)



_NAMES = {}  # torch dtype -> its name without "torch.", built as dtypes are met


def _name(dtype):
    _NAMES[dtype] = str(dtype).removeprefix("torch.")
    return _NAMES[dtype]


def _is_float(torch, a):
    return isinstance(a, torch.Tensor) and a.is_floating_point()


class _Bare:
    """:meth:`Torch.bare` as a plain context manager: entered for every answer read, where a
    generator-based one costs more than reading a small tensor."""

    __slots__ = ("function", "dispatch")

    def __init__(self, C):
        self.function = C.DisableTorchFunction()
        self.dispatch = getattr(C, "_DisableTorchDispatch", contextlib.nullcontext)()

    def __enter__(self):
        self.function.__enter__()
        try:
            self.dispatch.__enter__()
        except BaseException:
            self.function.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.dispatch.__exit__(*exc)
        finally:
            self.function.__exit__(*exc)
