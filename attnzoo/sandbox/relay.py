"""Calls relayed to an implementation in its own worker: the values that travel, both ways.

``attnzoo grade`` gives a graded test a proxy (:mod:`attnzoo.grade.proxy`) instead of the
implementation: the test's process never imports it, so its module, class, source and file
are out of reach. The implementation runs in a worker (:mod:`attnzoo.sandbox.worker`, verb
``relay``), which :func:`serve` turns into a relay: after the parent's ``relay`` message
(locator, contract, canary) it answers only the proxy's messages, over the same
:mod:`attnzoo.sandbox.wire` frames (JSON headers, raw buffers, never a pickle):

``{"op": "fresh"}`` → a new instance for the next test, nothing kept from the last;
``{"op": "ping"}`` → ``{"pong": true}``;
``{"op": "call", "fn", "args", "kwargs", "drop", ...}`` → ``{"answer", "changed"}`` |
``{"raised": {...}}``;
``{"op": "backward", "graph", "grads"}`` → ``{"grads"}`` | ``{"raised": {...}}``.
The implementation is one callable under the ``sdpa`` and ``varlen`` contracts
(:data:`CALLABLES`; ``attnzoo check --contract varlen`` calls it through the relay too), the
lesson's functions under ``lesson``.

What a call does to its caller's objects is relayed too, so that a test sees what it would
see calling the implementation directly: an argument the implementation writes into is
written back into the test's own array; an answer that *is* an argument (or an earlier answer)
comes back as that same object; an earlier answer the implementation changes later (a reused
output buffer) changes in the test's hands at the next call; an object passed twice is the same
object in the worker too (a cache keyed by identity hits); the layout (strides, read-only, a
tensor's storage offset) of each array is kept, what its storage holds outside it NaN; torch's
global random state and NumPy's error state travel with the call; warnings and exceptions
come back as their types (builtin, NumPy's or torch's; anything else as its nearest builtin
base), their text made inert. torch autograd goes through
:class:`attnzoo.grade.proxy` 's ``Function``: the worker keeps each call's graph until the next
test and answers backward with its own gradients.

What cannot be relayed: a change made after the call returned (a thread of the implementation)
is seen at the next call, not at once; an object that is not an array, a number, a string,
None or a tuple, list or dict of them is refused with a TypeError.
"""

import builtins
import math
import socket
import sys
import warnings

import numpy as np

from attnzoo.inert import inert
from attnzoo.sandbox import wire

TEXT = 2000  # characters of an exception's or a warning's message relayed
LESSON = ("causal_mask", "softmax", "attention", "causal_self_attention")
CALLABLES = ("sdpa", "varlen")  # contracts whose implementation is one callable
EXCEPTION_HOMES = ("numpy", "torch")  # modules an exception class may be rebuilt from
DEPTH = 16  # nesting of tuples, lists and dicts relayed


class Unrelayable(TypeError):
    """A value that cannot cross to or from the worker."""


def _torch():
    return sys.modules.get("torch")


def is_tensor(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


# -- values to frames ---------------------------------------------------------------------------


class Encoder:
    """Builds a JSON tree and its buffers. ``handle_of(obj)`` marks an array: None (no handle),
    ``("h", n)`` (sent under handle n), ``("new", n)`` (the same, and listed in
    :attr:`made`) or ``("same", n)`` (not sent: the other side holds it as n)."""

    def __init__(self, handle_of=None, grad=False):
        self.buffers = []
        self.handle_of = handle_of or (lambda obj: None)
        self.grad = grad  # keep requires_grad on the tensors sent
        self.made = {}  # handle -> array, of the ("new", n) marks

    def value(self, x, depth=0):
        if depth > DEPTH:
            raise Unrelayable("nested too deep to relay")
        if x is None or isinstance(x, (bool, int, float, str)) and type(x) in (
                bool, int, float, str):
            return x
        if isinstance(x, np.ndarray) and type(x) is np.ndarray:
            return self.array(x, "nd")
        if isinstance(x, np.generic) and x.dtype.name in wire.DTYPES:
            return dict(self.array(np.asarray(x), "nd", None), scalar=True)
        if is_tensor(x):
            return self.array(x, "pt")
        if type(x) in (tuple, list):
            return {type(x).__name__: [self.value(v, depth + 1) for v in x]}
        if type(x) is dict and all(type(k) is str for k in x):
            return {"dict": [[k, self.value(v, depth + 1)] for k, v in x.items()]}
        torch = _torch()
        if torch is not None and isinstance(x, torch.dtype):
            return {"torch_dtype": str(x).removeprefix("torch.")}
        raise Unrelayable(f"a {type(x).__name__} cannot be relayed to the implementation: "
                          "pass arrays, numbers, strings, None, or tuples, lists and dicts of "
                          "them")

    def array(self, a, kind, mark=...):
        mark = self.handle_of(a) if mark is ... else mark
        if mark is not None and mark[0] == "same":
            return {"same": mark[1]}
        desc = {kind: len(self.buffers)}
        if mark is not None:
            desc["h"] = mark[1]
            if mark[0] == "new":
                self.made[mark[1]] = a
        if kind == "nd":
            desc.update(strides=_elements(a.strides, a.itemsize), writeable=a.flags.writeable)
            data, name = np.ascontiguousarray(a), a.dtype.name
        else:
            torch = _torch()
            desc.update(strides=list(a.stride()), device=str(a.device),
                        rg=bool(self.grad and a.requires_grad))
            if a.storage_offset():  # a view that starts past its storage's beginning
                desc["offset"] = int(a.storage_offset())
            t = a.detach().to("cpu").contiguous()
            name = str(t.dtype).removeprefix("torch.")
            if t.dtype == torch.bfloat16:
                data = t.view(torch.int16).numpy().view(np.uint16)
            else:
                if name not in wire.DTYPES:
                    raise Unrelayable(f"a tensor of {name} cannot be relayed")
                data = t.numpy()
        if name not in wire.DTYPES:
            raise Unrelayable(f"an array of {name} cannot be relayed")
        desc.update(dtype=name, shape=list(a.shape))
        self.buffers.append(np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        return desc


def _elements(strides, itemsize):
    if any(s % itemsize for s in strides):
        return None  # not a whole number of elements: rebuilt contiguous
    return [s // itemsize for s in strides]


class Decoder:
    """Rebuilds values from a JSON tree and the frame's buffers; ``known(handle)`` is the object
    a handle names on this side (or None), ``made(obj, desc)`` is told of each new array."""

    def __init__(self, buffers, known=None, made=None):
        self.buffers = buffers
        self.known = known or (lambda h: None)
        self.made = made or (lambda obj, desc: None)

    def value(self, x, depth=0):
        if depth > DEPTH:
            raise wire.Malformed("nested too deep")
        if x is None or type(x) in (bool, int, float, str):
            return x
        if not isinstance(x, dict) or len(x) == 0:
            raise wire.Malformed("a value that is not one of the relay's")
        if "same" in x:
            obj = self.known(x["same"])
            if obj is None:
                raise wire.Malformed("an answer naming an object that is gone")
            return obj
        if "nd" in x or "pt" in x:
            return self.array(x)
        if "tuple" in x or "list" in x:
            items = x.get("tuple", x.get("list"))
            if not isinstance(items, list):
                raise wire.Malformed("a sequence that is not a list")
            out = [self.value(v, depth + 1) for v in items]
            return tuple(out) if "tuple" in x else out
        if "dict" in x and isinstance(x["dict"], list):
            out = {}
            for pair in x["dict"]:
                if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is str):
                    raise wire.Malformed("a dict entry that is not a pair")
                out[pair[0]] = self.value(pair[1], depth + 1)
            return out
        if "torch_dtype" in x and _torch() is not None:
            dtype = getattr(_torch(), str(x["torch_dtype"]), None)
            if isinstance(dtype, _torch().dtype):
                return dtype
        raise wire.Malformed("a value that is not one of the relay's")

    def array(self, desc):
        kind = "nd" if "nd" in desc else "pt"
        values, name = wire.array(dict(desc, array=desc[kind]), self.buffers)
        handle = desc.get("h")
        old = self.known(handle) if handle is not None else None
        if old is not None and refill(old, values, name):
            return old
        if kind == "nd":
            obj = _numpy(values, name, desc)
        else:
            obj = _tensor(values, name, desc)
        self.made(obj, desc)
        return obj


def _layout(desc, shape):
    strides = desc.get("strides")
    if not (isinstance(strides, list) and len(strides) == len(shape)
            and all(type(s) is int for s in strides)):
        return None
    if not all(shape) or strides == _contiguous(shape):
        return None
    return strides


def _contiguous(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return out[::-1]


def _extent(shape, strides):
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    return lo, hi - lo + 1


def _numpy(values, name, desc):
    if name == "bfloat16":
        raise wire.Malformed("a NumPy array of bfloat16")
    strides = _layout(desc, values.shape)
    out = values
    if strides is not None:
        lo, size = _extent(values.shape, strides)
        if size > 4 * values.size + 64:  # a layout that spreads far: not worth rebuilding
            out = values.copy()
        else:
            base = np.empty(size, values.dtype)
            out = np.lib.stride_tricks.as_strided(
                base[-lo:], values.shape, [s * values.itemsize for s in strides])
            out[...] = values
    if "scalar" in desc:
        return out[()]
    if desc.get("writeable") is False:
        out.flags.writeable = False
    return out


def _tensor(values, name, desc):
    torch = _torch()
    if torch is None:
        raise wire.Malformed("a tensor, with no torch to make it")
    t = torch.from_numpy(np.ascontiguousarray(values))
    if name == "bfloat16":
        t = t.to(torch.bfloat16)
    strides = _layout(desc, list(values.shape))
    spread = [n > 1 and s == 0 for n, s in zip(values.shape, strides or ())]
    if any(spread):  # an expanded tensor (a gradient of a sum): the same, expanded again
        one = values[tuple(slice(0, 1) if e else slice(None) for e in spread)]
        reduced = dict(desc, strides=[0 if e else s for e, s in zip(spread, strides)])
        return _tensor(np.ascontiguousarray(one), name, reduced).expand(*values.shape)
    offset = desc.get("offset", 0)
    if type(offset) is not int or offset < 0:
        raise wire.Malformed(f"a storage offset of {offset!r}")
    if offset and strides is None and all(values.shape):
        strides = _contiguous(list(values.shape))
    if strides is not None and min(strides) >= 0:
        _, size = _extent(values.shape, strides)
        if offset + size <= 4 * values.size + 64:  # else dense: not worth the memory
            # what no element of the view covers is NaN (0 for other dtypes), the same each
            # run: a kernel that reads past its view's strides or offset reads it
            base = torch.full((offset + size,), math.nan if t.is_floating_point() else 0,
                              dtype=t.dtype)
            view = base.as_strided(list(values.shape), strides, offset)
            view.copy_(t)
            t = view
    device = desc.get("device")
    if isinstance(device, str) and device != "cpu":
        try:
            t = t.to(device)
        except (RuntimeError, AssertionError):  # no such device here: stays on the CPU
            pass
    if desc.get("rg") is True and t.is_floating_point():
        t = t.detach().requires_grad_(True)
    return t


def refill(old, values, name):
    """Write ``values`` into ``old`` in place when shape and dtype agree; False if they do not
    (the caller makes a new object)."""
    if isinstance(old, np.ndarray):
        if old.shape != values.shape or old.dtype.name != name:
            return False
        if not old.flags.writeable:
            try:
                old.flags.writeable = True
            except ValueError:
                return False
            np.copyto(old, values)
            old.flags.writeable = False
            return True
        np.copyto(old, values)
        return True
    torch = _torch()
    if torch is None or not isinstance(old, torch.Tensor):
        return False
    if list(old.shape) != list(values.shape) or str(old.dtype).removeprefix("torch.") != name:
        return False
    new = torch.from_numpy(np.ascontiguousarray(values))
    if name == "bfloat16":
        new = new.to(torch.bfloat16)
    with torch.no_grad():
        try:
            old.copy_(new)
        except RuntimeError:
            return False
    return True


def values_of(obj):
    """The bytes an object's values are, as compared between calls."""
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj).tobytes()
    torch = _torch()
    t = obj.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


# -- exceptions and warnings --------------------------------------------------------------------


def raised(e):
    """An exception as data: each class of its MRO (module, name) and its message, inert."""
    if isinstance(e, SystemExit):
        text = f"the implementation called sys.exit({e.code!r})"
    else:
        try:
            text = str(e)
        except BaseException:  # noqa: BLE001 - an exception whose __str__ fails
            text = ""
    return {"classes": _public(type(e), BaseException), "text": inert(text[:TEXT], lines=True)}


def _public(cls, base):
    """The classes of ``cls``'s MRO the proxy may rebuild (builtin, NumPy's, torch's): a class
    of the implementation's own module would name it, so it never leaves the worker."""
    return [[c.__module__, c.__qualname__] for c in cls.__mro__ if issubclass(c, base)
            and (c.__module__ == "builtins" or c.__module__.split(".")[0] in EXCEPTION_HOMES)]


def rebuilt(info):
    """The exception to raise in the test for :func:`raised`'s data: the first class of its
    MRO that is a builtin exception or NumPy's or torch's (already imported here), with its
    message; RuntimeError when nothing fits."""
    text = inert(str(info.get("text", ""))[:TEXT], lines=True) if isinstance(info, dict) else ""
    classes = info.get("classes") if isinstance(info, dict) else None
    for pair in classes if isinstance(classes, list) else ():
        cls = _exception_class(pair)
        if cls is None:
            continue
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            continue
    return RuntimeError(text)


_NEVER = (KeyboardInterrupt, GeneratorExit, StopIteration, StopAsyncIteration)


def _exception_class(pair):
    if not (isinstance(pair, list) and len(pair) == 2 and all(type(p) is str for p in pair)):
        return None
    module, name = pair
    if module == "builtins":
        cls = getattr(builtins, name, None)
    elif module.split(".")[0] in EXCEPTION_HOMES and module in sys.modules:
        cls = sys.modules[module]
        for part in name.split("."):
            cls = getattr(cls, part, None)
    else:
        return None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or issubclass(cls, _NEVER):
        return None
    return cls


def warned(records):
    """Warnings caught during a call, as data."""
    out = []
    for w in records[:20]:
        cls = w.category if isinstance(w.category, type) else UserWarning
        out.append({"classes": _public(cls, Warning),
                    "text": inert(str(w.message)[:TEXT], lines=True)})
    return out


def rewarn(items):
    """Emit in the test the warnings the implementation emitted."""
    for item in items if isinstance(items, list) else ():
        classes = item.get("classes") if isinstance(item, dict) else None
        cls = next((c for c in map(_exception_class, classes if isinstance(classes, list)
                                   else ()) if c is not None and issubclass(c, Warning)),
                   UserWarning)
        warnings.warn(inert(str(item.get("text", ""))[:TEXT], lines=True), cls, stacklevel=3)


# -- the worker's side --------------------------------------------------------------------------


class Relay:
    """The implementation in the worker, one instance per test, and what its calls keep."""

    def __init__(self, impl, contract, canary):
        self.impl, self.contract, self.canary = impl, contract, canary
        self.rng = False
        self.fresh()

    def functions(self):
        if self.contract in CALLABLES:
            return ["__call__"] if callable(self.impl) else []
        return [f for f in LESSON if callable(getattr(self.impl, f, None))]

    def fresh(self):
        from attnzoo.sandbox.target import renewed

        obj = renewed(self.impl)
        if self.canary:
            from attnzoo.grade.canary import dressed

            obj = dressed(obj)
        self.current = obj
        self.objects, self.seen, self.ids = {}, {}, {}  # handle -> object, bytes; id -> handle
        self.graphs, self.next = {}, 0

    def _register(self, obj, handle, values=None):
        self.objects[handle] = obj
        self.seen[handle] = values_of(obj) if values is None else values
        self.ids[id(obj)] = handle

    def _drop(self, handles):
        for h in handles if isinstance(handles, list) else ():
            obj = self.objects.pop(h, None)
            self.seen.pop(h, None)
            if obj is not None and self.ids.get(id(obj)) == h:
                del self.ids[id(obj)]

    def handle(self, header, buffers):
        op = header.get("op")
        if op == "ping":
            return {"pong": True}, []
        if op == "fresh":
            self.fresh()
            return {"fresh": True}, []
        self._drop(header.get("drop"))
        if op == "call":
            return self.call(header, buffers)
        if op == "backward":
            return self.backward(header, buffers)
        return {"raised": raised(RuntimeError("not a relay message"))}, []

    def _rng_in(self, header, buffers):
        torch = _torch()
        i = header.get("rng")
        self.rng = type(i) is int
        if torch is not None and type(i) is int and 0 <= i < len(buffers):
            torch.set_rng_state(torch.from_numpy(np.frombuffer(buffers[i], np.uint8).copy()))

    def _rng_out(self, enc):
        torch = _torch()
        if torch is None or not self.rng:  # the proxy sends it (torch's rows): it gets it back
            return None
        enc.buffers.append(torch.get_rng_state().numpy())
        return len(enc.buffers) - 1

    def call(self, header, buffers):
        grad = header.get("grad") is True
        made = []
        dec = Decoder(buffers, known=None if grad else self.objects.get,
                      made=lambda obj, desc: made.append((obj, desc)))
        try:
            args = dec.value(header.get("args"))
            kwargs = dec.value(header.get("kwargs"))
        except (wire.Malformed, wire.NotNumbers) as e:
            return {"raised": raised(TypeError(f"the arguments did not arrive: {e}"))}, []
        if not (isinstance(args, list) and isinstance(kwargs, dict)):
            return {"raised": raised(TypeError("the arguments did not arrive"))}, []
        if not grad:
            for obj, desc in made:
                if desc.get("h") is not None and not isinstance(obj, np.generic):
                    self._register(obj, desc["h"])
        try:
            fn = self._function(header.get("fn"))
        except wire.Malformed as e:
            return {"raised": raised(AttributeError(str(e)))}, []
        self._rng_in(header, buffers)
        err = header.get("errstate")
        err = err if isinstance(err, dict) and set(err) <= {"divide", "over", "under",
                                                            "invalid"} else {}
        torch = _torch()
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            try:
                with np.errstate(**err):
                    if grad and torch is not None:
                        with torch.enable_grad():
                            answer = fn(*args, **kwargs)
                    else:
                        answer = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - the implementation's, relayed
                enc = Encoder()
                reply = {"raised": raised(e), "warned": warned(records)}
                reply["rng"] = self._rng_out(enc)
                return reply, enc.buffers
        enc = Encoder(handle_of=None if grad else self._answer_handle, grad=grad)
        try:
            tree = enc.value(answer)
        except Unrelayable as e:
            return {"raised": raised(TypeError(str(e)))}, []
        reply = {"answer": tree, "warned": warned(records)}
        if grad:
            reply["graph"] = self._keep_graph(args, kwargs, answer)
        else:
            for h, obj in enc.made.items():
                self._register(obj, h)
            reply["changed"] = self._changed(enc, fresh=enc.made)
        reply["rng"] = self._rng_out(enc)
        return reply, enc.buffers

    def _function(self, name):
        if self.contract in CALLABLES:
            return self.current
        fn = getattr(self.current, name, None) if name in LESSON else None
        if not callable(fn):  # worded here: Python's own message would name the class
            raise wire.Malformed(f"the implementation under test has no {inert(str(name))[:40]}")
        return fn

    def _answer_handle(self, obj):
        """An answer already known to the proxy is named; a new one gets a handle of its own."""
        h = self.ids.get(id(obj))
        if h is not None and self.objects.get(h) is obj:
            return ("same", h)
        self.next -= 1
        return ("new", self.next)

    def _changed(self, enc, fresh):
        """Objects the proxy holds whose values changed since it last had them."""
        out = []
        for h, obj in list(self.objects.items()):
            if h in fresh:
                continue
            now = values_of(obj)
            if now != self.seen[h]:
                self.seen[h] = now
                kind = "nd" if isinstance(obj, np.ndarray) else "pt"
                out.append(enc.array(obj, kind, ("h", h)))
        return out

    def _keep_graph(self, args, kwargs, answer):
        inputs = [t for t in _tensors((args, kwargs)) if t.requires_grad]
        outputs = _tensors(answer)  # as the proxy counts them; those without a graph get none
        self.next -= 1
        self.graphs[self.next] = (inputs, outputs)
        return self.next

    def backward(self, header, buffers):
        torch = _torch()
        graph = self.graphs.get(header.get("graph"))
        if graph is None or torch is None:
            return {"raised": raised(RuntimeError("no graph kept for this backward"))}, []
        inputs, outputs = graph
        try:
            grads = Decoder(buffers).value(header.get("grads"))
        except (wire.Malformed, wire.NotNumbers) as e:
            return {"raised": raised(TypeError(f"the gradients did not arrive: {e}"))}, []
        if not isinstance(grads, list) or len(grads) != len(outputs):
            return {"raised": raised(TypeError("the gradients did not arrive"))}, []
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
        self._rng_in(header, buffers)
        enc = Encoder()
        if not pairs:
            return {"grads": [None] * len(inputs), "rng": self._rng_out(enc)}, enc.buffers
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            try:
                found = torch.autograd.grad([o for o, _ in pairs], inputs,
                                            [g.to(o.dtype) for o, g in pairs],
                                            retain_graph=True, allow_unused=True)
            except BaseException as e:  # noqa: BLE001 - the implementation's, relayed
                return {"raised": raised(e), "warned": warned(records),
                        "rng": self._rng_out(enc)}, enc.buffers
        tree = enc.value(list(found))
        return {"grads": tree, "warned": warned(records), "rng": self._rng_out(enc)}, enc.buffers


def _tensors(x):
    """The tensors in a value, in order (depth first)."""
    if is_tensor(x):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def serve(sock, header):
    """In the worker: become a relay for the implementation ``header`` names; returns at EOF.
    The first reply (to the parent) is ``{"relaying": {"functions": [...], "parameters"}}`` (for
    the varlen contract with ``"declared"``: its ATTNZOO_* declarations as data) or
    ``{"bad"}``."""
    from attnzoo.sandbox import lifeline
    from attnzoo.sandbox.target import BadTarget, load

    lifeline.dumpable(False)  # no test reads this process's memory, maps or environment
    try:
        impl = load(str(header.get("locator")))
        relay = Relay(impl, header.get("contract"), header.get("canary") is True)
        found = {"functions": relay.functions(), "parameters": parameters(impl)}
        if header.get("contract") == "varlen":
            found["declared"] = declared(impl)
        wire.send(sock, {"relaying": found})
    except BadTarget as e:
        wire.send(sock, {"bad": str(e)})
        return
    while True:
        try:
            message, buffers = wire.read(sock)
        except (EOFError, OSError, wire.Malformed):
            return
        try:
            reply, out = relay.handle(message, buffers)
        except wire.Malformed as e:
            reply, out = {"raised": raised(RuntimeError(f"a message the relay cannot read: "
                                                        f"{e}"))}, []
        try:
            wire.send(sock, reply, out)
        except OSError:
            return


VARLEN_DECLARATIONS = ("ATTNZOO_UNSUPPORTED", "ATTNZOO_EMPTY_ROWS", "ATTNZOO_WINDOW_COUNTING")


def declared(impl):
    """What the callable, or else its module, declares of itself, as data the parent decides
    on (attnzoo.varlen_check.declarations): strings, or that a value is not strings."""
    import inspect

    from attnzoo.sandbox.offer import _raw

    def read(name):
        try:
            return _raw(getattr(impl, name, getattr(inspect.getmodule(impl), name, ())))
        except Exception as e:  # noqa: BLE001 - a value that raises when read declares nothing
            return {"invalid": type(e).__name__}

    return {n: read(n) for n in VARLEN_DECLARATIONS}


def parameters(impl):
    """The callable's parameters as (name, kind) pairs, kind as inspect names it, or None when
    its signature cannot be read (a builtin): what a caller checks the contract's keywords
    against before it calls."""
    import inspect

    try:
        found = inspect.signature(impl).parameters.values()
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name] for p in found]


def pair():
    return socket.socketpair()
