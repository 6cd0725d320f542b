"""The NumPy side of a call in the implementation's process: building its arguments and reading
its answers as raw bytes.

:class:`Numpy` is one of the two array backends :mod:`attnzoo.sandbox.probes` drives (the other
is :mod:`attnzoo.sandbox.torch_backend`, which builds its tensors from :func:`numpy_input` and
names its arguments with :func:`named_arrays`). An array is read through ``np.ndarray``'s own C
methods, captured at import, so a subclass cannot choose what is read.
"""

import numpy as np

from attnzoo.sandbox.guard import guarded
from detectors.kit.calls import ANY_INPUT, ARG_NAMES
from detectors.kit.memory import laid_out_array
from detectors.kit.verdict import CRASHED, ImplementationFailure

_ndarray_view = np.ndarray.view
_ndarray_tobytes = np.ndarray.tobytes


def named_arrays(backend, args, kwargs, request):
    """(name, array) of every array argument, by the contract's names."""
    named = list(zip(ARG_NAMES[request["fn"]], args)) + list(kwargs.items())
    return [(n, a) for n, a in named if backend.is_array(a)]


def _built(backend, request):
    """The request's arguments built again, as new arrays."""
    return ([backend.build(a, request) for a in request["args"]],
            {k: backend.build(v, request) for k, v in request["kwargs"].items()})


def _plain(a, buffers):
    """A plain little-endian ndarray's description, its bytes queued in ``buffers``."""
    dtype = a.dtype
    if dtype.kind not in "biuf":
        return {"dtype": str(dtype), "shape": list(a.shape)}
    a = a.astype(dtype.newbyteorder("<"), copy=False)
    buffers.append(_ndarray_tobytes(a, order="C"))
    return {"array": len(buffers) - 1, "dtype": dtype.name, "shape": list(a.shape)}


def numpy_input(desc):
    """A writable ndarray from a decoded request argument (bytes, dtype name, shape)."""
    data, name, shape = desc["bytes"], desc["dtype"], desc["shape"]
    wire, native = _INPUT_DTYPES.get(name) or _input_dtypes(name)
    return np.frombuffer(data, dtype=wire).reshape(shape).astype(native)


_INPUT_DTYPES = {}  # dtype name -> (its little-endian dtype, its native one), built once


def _input_dtypes(name):
    _INPUT_DTYPES[name] = (np.dtype(name).newbyteorder("<"), np.dtype(name))
    return _INPUT_DTYPES[name]


class Numpy:
    array_name = "a numpy.ndarray"

    def build(self, desc, request):
        if "value" in desc:
            return desc["value"]
        return laid_out_array(numpy_input(desc), request["layout"])

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
        for _, a in named_arrays(self, args, kwargs, request):
            a.flags.writeable = False
        try:
            return guarded(fn, args, kwargs, request), args, kwargs, []
        except ImplementationFailure:
            pass
        written = []
        for name, _ in named_arrays(self, args, kwargs, request):
            again, again_kw = _built(self, request)
            dict(named_arrays(self, again, again_kw, request))[name].flags.writeable = False
            try:
                guarded(fn, again, again_kw, request)
            except ImplementationFailure:
                written.append(name)
        args, kwargs = _built(self, request)
        return guarded(fn, args, kwargs, request), args, kwargs, written or [ANY_INPUT]

    def gradcheck(self, fn, args, kwargs, request, buffers):
        raise ImplementationFailure(CRASHED, "NumPy has no autograd", "gradcheck")
