"""What a graded test is handed: a proxy whose only state is a connection to the implementation.

The implementation under test runs in a worker of its own (:mod:`attnzoo.sandbox.relay`); the
test's process never imports it. The ``sdpa`` fixture is a :class:`Callable`, the ``attention``
fixture a :class:`Lesson` (its four functions, each a :class:`Function`), the ``varlen`` fixture a
:class:`Varlen`. Each holds one
:class:`Connection` and nothing else; every row of the grade gets objects of these same classes,
with the same ``repr``, so a test that looks at the object, its type, its module, its
attributes, its closure or what the garbage collector says it refers to learns nothing of which
implementation is on the other end. Calling it sends the arguments to the worker and returns
what the implementation returned, rebuilt here: NumPy arrays and torch tensors with the same
dtype, shape, layout and device, the test's own objects where the implementation returned or
wrote into them (:mod:`attnzoo.sandbox.relay` says what is relayed), and its exceptions and
warnings as their own types. torch autograd works through :class:`_Relayed`: the worker keeps the
call's graph, and backward asks it for the gradients.

What it does not hide: the implementation's behaviour. A test can still tell implementations
apart by what they return, or how long they take; that is what a test is for.
"""

import socket
import weakref

import numpy as np

from attnzoo.sandbox import relay, wire

LESSON = relay.LESSON
TORCH_ROWS = ("torch", "sdpa", "varlen")  # backends whose calls carry torch's random state


class Gone(RuntimeError):
    """The connection to the implementation is gone (its worker died, or the test closed it)."""


class Connection:
    """The test's end of the relay: a socket, the handles of the objects the worker mirrors."""

    def __init__(self, sock, functions, backend):
        self._sock = sock
        self._functions = tuple(functions)
        self._backend = backend
        self._ids = {}  # id(obj) -> (weakref, handle) of the objects the worker mirrors
        self._by_handle = {}  # handle -> weakref
        self._drop = []  # handles of objects gone here, to forget there
        self._next = 0
        self._generation = 0
        self._used = False
        self._broken = False

    # -- the test's objects and their handles -----------------------------------------------

    def _handle_of(self, obj):
        if isinstance(obj, np.generic):
            return None
        entry = self._ids.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return ("h", entry[1])
        self._next += 1
        self._remember(obj, self._next)
        return ("h", self._next)

    def _remember(self, obj, handle):
        try:
            ref = weakref.ref(obj)
        except TypeError:
            return
        self._ids[id(obj)] = (ref, handle)
        self._by_handle[handle] = ref
        weakref.finalize(obj, self._forget, id(obj), handle, self._generation)

    def _forget(self, key, handle, generation):
        if generation != self._generation:
            return
        if self._by_handle.pop(handle, None) is not None:
            self._drop.append(handle)
        entry = self._ids.get(key)
        if entry is not None and entry[1] == handle:
            del self._ids[key]

    def _known(self, handle):
        ref = self._by_handle.get(handle) if type(handle) is int else None
        return None if ref is None else ref()

    # -- messages ------------------------------------------------------------------------------

    def _exchange(self, header, buffers=()):
        if self._broken:
            raise Gone("the implementation under test is gone: its worker was killed or its "
                       "connection closed")
        self._used = True
        try:
            self._sock.settimeout(None)
            wire.send(self._sock, header, buffers)
            reply, got = wire.read(self._sock)
        except (EOFError, OSError, wire.Malformed) as e:
            self._broken = True
            raise Gone(f"the implementation under test is gone ({type(e).__name__}): its "
                       "worker was killed or its connection closed") from None
        if not isinstance(reply, dict):
            self._broken = True
            raise Gone("the implementation's worker broke the relay's protocol")
        return reply, got

    def fresh(self):
        """A new instance for the next test; nothing mirrored is kept."""
        self._generation += 1
        self._ids, self._by_handle, self._drop = {}, {}, []
        self._used = False
        if not self._broken:
            self._exchange({"op": "fresh"})
            self._used = False

    def alive(self):
        """Is the implementation still reachable? (Asked after each test that used it.)"""
        if self._broken:
            return False
        try:
            reply, _ = self._exchange({"op": "ping"})
        except Gone:
            return False
        return reply.get("pong") is True

    def used(self):
        return self._used

    def _torch_rng(self, header, enc):
        torch = relay._torch()
        if self._backend in TORCH_ROWS and torch is not None:
            enc.buffers.append(torch.get_rng_state().numpy())
            header["rng"] = len(enc.buffers) - 1

    def _after(self, reply, got):
        __tracebackhide__ = True
        torch = relay._torch()
        i = reply.get("rng")
        if torch is not None and type(i) is int and 0 <= i < len(got) and \
                self._backend in TORCH_ROWS:
            state = np.frombuffer(got[i], np.uint8)
            if state.size == torch.get_rng_state().numel():
                torch.set_rng_state(torch.from_numpy(state.copy()))
        relay.rewarn(reply.get("warned"))
        if "raised" in reply:
            raise relay.rebuilt(reply["raised"])

    def call(self, fn, args, kwargs):
        __tracebackhide__ = True
        torch = relay._torch()
        grad = (torch is not None and torch.is_grad_enabled()
                and any(t.requires_grad for t in relay._tensors((args, kwargs))))
        if grad:
            return _call_with_grad(self, fn, args, kwargs)
        enc = relay.Encoder(handle_of=self._handle_of)
        header = {"op": "call", "fn": fn, "args": enc.value(list(args)),
                  "kwargs": enc.value(dict(kwargs)), "errstate": _errstate()}
        self._torch_rng(header, enc)
        header["drop"], self._drop = self._drop, []
        reply, got = self._exchange(header, enc.buffers)
        self._after(reply, got)
        try:
            dec = relay.Decoder(got, known=self._known,
                                made=lambda obj, desc: self._remember(obj, desc["h"])
                                if type(desc.get("h")) is int else None)
            for desc in reply.get("changed") or ():
                if isinstance(desc, dict) and self._known(desc.get("h")) is not None:
                    dec.array(desc)
            return dec.value(reply.get("answer"))
        except (wire.Malformed, wire.NotNumbers) as e:
            self._broken = True
            raise Gone(f"the implementation's worker sent what the relay cannot read: {e}") \
                from None

    def forward(self, fn, args, kwargs):
        """The grad path's call: fresh answers and the handle of the graph the worker kept."""
        enc = relay.Encoder(grad=True)
        header = {"op": "call", "fn": fn, "args": enc.value(list(args)),
                  "kwargs": enc.value(dict(kwargs)), "errstate": _errstate(), "grad": True}
        self._torch_rng(header, enc)
        header["drop"], self._drop = self._drop, []
        reply, got = self._exchange(header, enc.buffers)
        self._after(reply, got)
        try:
            return relay.Decoder(got).value(reply.get("answer")), reply.get("graph")
        except (wire.Malformed, wire.NotNumbers) as e:
            self._broken = True
            raise Gone(f"the implementation's worker sent what the relay cannot read: {e}") \
                from None

    def backward(self, graph, grads):
        enc = relay.Encoder()
        header = {"op": "backward", "graph": graph, "grads": enc.value(list(grads))}
        self._torch_rng(header, enc)
        reply, got = self._exchange(header, enc.buffers)
        self._after(reply, got)
        try:
            found = relay.Decoder(got).value(reply.get("grads"))
        except (wire.Malformed, wire.NotNumbers) as e:
            self._broken = True
            raise Gone(f"the implementation's worker sent what the relay cannot read: {e}") \
                from None
        if not isinstance(found, list):
            raise Gone("the implementation's worker sent no gradients")
        return found


def _errstate():
    return {k: v for k, v in np.geterr().items() if k in ("divide", "over", "under", "invalid")}


# -- autograd through the relay -----------------------------------------------------------------


def _call_with_grad(conn, fn, args, kwargs):
    __tracebackhide__ = True
    import torch

    inputs = [t for t in relay._tensors((args, kwargs)) if t.requires_grad]
    box = {}
    flat = _Relayed.apply(conn, fn, args, kwargs, box, *inputs)
    # an answer with no graph in the worker has none here either: its backward fails as it
    # would have
    it = iter(t if tracked else t.detach() for t, tracked in zip(flat, box["tracked"]))
    return _rebuild(box["answer"], lambda t: next(it), torch)


def _rebuild(tree, take, torch):
    if isinstance(tree, torch.Tensor):
        return take(tree)
    if isinstance(tree, tuple):
        return tuple(_rebuild(v, take, torch) for v in tree)
    if isinstance(tree, list):
        return [_rebuild(v, take, torch) for v in tree]
    if isinstance(tree, dict):
        return {k: _rebuild(v, take, torch) for k, v in tree.items()}
    return tree


def _function():
    import torch

    class _Relayed(torch.autograd.Function):
        """The implementation's call as one autograd node; its backward asks the worker."""

        @staticmethod
        def forward(ctx, conn, fn, args, kwargs, box, *inputs):
            answer, graph = conn.forward(fn, args, kwargs)
            box["answer"] = answer
            flat = [t.detach() for t in relay._tensors(answer)]
            box["tracked"] = [t.requires_grad for t in relay._tensors(answer)]
            ctx.conn, ctx.graph = conn, graph
            ctx.floats = [t.is_floating_point() for t in flat]
            ctx.n_inputs = len(inputs)
            ctx.mark_non_differentiable(*[t for t in flat if not t.is_floating_point()])
            return tuple(flat)

        @staticmethod
        def backward(ctx, *grads):
            sent = [g if f else None for g, f in zip(grads, ctx.floats)]
            found = ctx.conn.backward(ctx.graph, sent)
            found = (found + [None] * ctx.n_inputs)[:ctx.n_inputs]
            return (None, None, None, None, None, *found)

    return _Relayed


class _Lazy:
    """The autograd Function, made on first use (torch is imported only by a torch test)."""

    def __init__(self):
        self.fn = None

    def apply(self, *a):
        if self.fn is None:
            self.fn = _function()
        return self.fn.apply(*a)


_Relayed = _Lazy()


# -- what the fixtures hand to a test ----------------------------------------------------------


class Function:
    """One function of the implementation under test; calling it calls the implementation."""

    __slots__ = ("_connection", "_name")

    def __init__(self, connection, name):
        self._connection, self._name = connection, name

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # a failure shows the test's line, not the relay's
        return self._connection.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<{self._name} of the attention under test>"


class Callable:
    """The implementation under test with F.scaled_dot_product_attention's signature."""

    __slots__ = ("_connection",)

    def __init__(self, connection):
        self._connection = connection

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return self._connection.call("__call__", args, kwargs)

    def __repr__(self):
        return "<sdpa under test>"


class Varlen:
    """The implementation under test with flash-attention's attn_varlen signature."""

    __slots__ = ("_connection",)

    def __init__(self, connection):
        self._connection = connection

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return self._connection.call("__call__", args, kwargs)

    def __repr__(self):
        return "<varlen attention under test>"


class Lesson:
    """The lesson's four functions of the implementation under test; one it lacks skips the
    test asking for it."""

    __slots__ = ("_connection",)
    FUNCTIONS = LESSON

    def __init__(self, connection):
        self._connection = connection

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in LESSON:
            if name not in self._connection._functions:
                import pytest

                pytest.skip(f"the implementation under test has no {name}")
            return Function(self._connection, name)
        raise AttributeError(name)

    def __dir__(self):
        return list(LESSON)

    def __repr__(self):  # what pytest prints beside a failing assertion: never the bug's name
        return "<attention under test>"


def connect(fd, functions, backend):
    """The test process's connection, from the socket it was handed."""
    return Connection(socket.socket(fileno=fd), functions, backend)
