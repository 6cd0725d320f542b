"""The worker protocol: a JSON header and raw byte buffers, never a pickle.

A frame is ``[u32 header length][u64 body length][header JSON][body]``; the header's
``"buffers"`` lists the sizes of the byte strings the body holds, in order. Arrays travel as
``{"array": i, "dtype": name, "shape": [...]}`` pointing at buffer ``i``. Everything the parent
reads from the worker goes through :func:`read` and :func:`array`: the sizes are bounded, the
JSON is plain data, and an array is rebuilt only for a dtype on the allow-list :data:`DTYPES`,
with its byte count checked against its shape, and each buffer is rebuilt into one array at
most. Anything else is :class:`Malformed`: the target broke the protocol, which is a verdict on
the target, never a fault of attnzoo.

What the parent allocates for a frame is bounded by a multiple of the frame itself: its bytes
are received into memory that grows as they arrive (a length prefix alone sets aside 1 MiB at
most), parsing its JSON makes Python objects of at most about 30 times its size, an array is a
copy of its own buffer (converted to float64 at most), and no two arrays can be made of one
buffer. Whoever builds more from a reply (gradcheck's Jacobians) checks its size against the
frame's first (:func:`affordable`).
"""

import json
import math
import socket
import struct
import time

import numpy as np

from attnzoo.inert import inert
from reference import FLOAT_DTYPES

PREFIX = struct.Struct(">IQ")
MAX_HEADER = 1 << 24  # 16 MiB of JSON: far above any honest reply
MAX_BODY = 1 << 28  # 256 MiB of array bytes: the battery's answers are far smaller
MAX_NDIM = 32
GROWTH = 1 << 20  # bytes first set aside for a frame's part, doubled as more arrive
IOV_MAX = 1024  # buffers one sendmsg may gather (Linux's UIO_MAXIOV)

# dtype name -> the little-endian NumPy dtype its bytes are read as; bfloat16 travels as its
# 16 raw bits. Everything not named here (objects, strings, complex, structured) is refused.
DTYPES = {n: np.dtype(n).newbyteorder("<") for n in (
    "float64", "float32", "float16", "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64")}
DTYPES["bfloat16"] = np.dtype("<u2")
NATIVE = {d.char: d.newbyteorder("=") for d in (*DTYPES.values(), np.dtype("<f4"))}  # by char
FLOATS = FLOAT_DTYPES  # the contract's float dtypes


class Malformed(Exception):
    """What came over the socket is not a message of this protocol."""


def send(sock, header, buffers=()):
    """Send one frame: ``header`` (JSON-able) and the byte strings it refers to, gathered by
    the kernel from where they lie (``sendmsg``): the arrays are not first copied into one."""
    buffers = [memoryview(b).cast("B") for b in buffers]
    head = json.dumps(dict(header, buffers=[len(b) for b in buffers])).encode()
    body = sum(len(b) for b in buffers)
    _send_all(sock, [PREFIX.pack(len(head), body) + head] + [b for b in buffers if len(b)])


def _send_all(sock, parts):
    """``sendall`` of several buffers in turn, within the socket's timeout for the whole."""
    limit = sock.gettimeout()
    until = None if limit is None else time.monotonic() + limit
    try:
        while parts:
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the frame was not taken in time")
                sock.settimeout(left)
            sent = sock.sendmsg(parts[:IOV_MAX])
            while parts and sent >= len(parts[0]):
                sent -= len(parts.pop(0))
            if sent:
                parts[0] = parts[0][sent:]
    finally:
        sock.settimeout(limit)


def read(sock, seconds=None):
    """One frame as ``(header, buffers)`` within ``seconds`` (TimeoutError after, however the
    bytes trickle in); EOFError when the other side has closed."""
    until = None if seconds is None else time.monotonic() + seconds
    hlen, blen = PREFIX.unpack(_exactly(sock, PREFIX.size, until, eof_ok=True))
    if hlen > MAX_HEADER or blen > MAX_BODY:
        raise Malformed(f"a frame of {hlen + blen} bytes, over the protocol's limit")
    try:
        header = json.loads(_exactly(sock, hlen, until).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Malformed(f"a header that is not JSON ({type(e).__name__})") from None
    sizes = header.get("buffers") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(_count(s) for s in sizes) or sum(sizes) != blen:
        raise Malformed("a header whose buffer sizes do not add up")
    body = memoryview(_exactly(sock, blen, until))
    buffers, at = Buffers(), 0
    for s in sizes:
        buffers.append(body[at:at + s])  # views of the one body: nothing copied
        at += s
    return header, buffers


class Buffers(list):
    """A frame's buffers, remembering which have been rebuilt into an array."""

    def __init__(self, *args):
        super().__init__(*args)
        self.taken = set()


def _exactly(sock, n, until, eof_ok=False):
    """``n`` bytes, received straight into one bytearray that grows as they arrive: a frame
    that announces more than it sends costs twice what it sent (or :data:`GROWTH`), not what
    it announced."""
    data = bytearray(min(n, GROWTH))
    got = 0
    while got < n:
        if got == len(data):
            data.extend(bytes(min(n, 2 * len(data)) - len(data)))
        if until is not None:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError("no complete message in time")
            sock.settimeout(left)
        k = sock.recv_into(memoryview(data)[got:])
        if not k:
            if eof_ok and got == 0:
                raise EOFError("the connection was closed")
            raise Malformed(f"the connection closed in the middle of a message ({got}/{n} bytes)")
        got += k
    return data


def _count(x):
    return type(x) is int and x >= 0


def array(desc, buffers):
    """Rebuild an array the worker described: (ndarray in the allowed dtype, dtype name).

    bfloat16 comes back as float32 (exact); the caller decides any further conversion.
    """
    if not isinstance(desc, dict) or not isinstance(desc.get("dtype"), str):
        raise Malformed("an array without a dtype")
    name, shape, i = desc["dtype"], desc.get("shape"), desc.get("array")
    if name not in DTYPES:
        raise NotNumbers(name)
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM and all(_count(s) for s in shape)):
        raise Malformed(f"an array with shape {shape!r}")
    if not (_count(i) and i < len(buffers)):
        raise Malformed("an array that points at no buffer")
    taken = getattr(buffers, "taken", None)
    if taken is not None:  # a frame read from a worker: one array per buffer
        if i in taken:
            raise Malformed(f"two arrays made of buffer {i}")
        taken.add(i)
    dtype = DTYPES[name]
    if math.prod(shape) * dtype.itemsize != len(buffers[i]):
        raise Malformed(f"{len(buffers[i])} bytes for a {name} array of shape {tuple(shape)}")
    a = np.frombuffer(buffers[i], dtype=dtype).reshape(shape)
    if name == "bfloat16":
        a = (a.astype("<u4") << 16).view("<f4")
    elif name == "bool" and a.size and a.view(np.uint8).max() > 1:
        raise Malformed("a bool array holding bytes other than 0 and 1")
    return a.astype(NATIVE[a.dtype.char]), name


def affordable(nbytes, buffers, factor, what):
    """Malformed unless ``nbytes`` (what the parent would allocate from a reply) is at most
    ``factor`` times the bytes of the reply's buffers."""
    sent = sum(len(b) for b in buffers)
    if nbytes > factor * sent:
        raise Malformed(f"{what} of {nbytes} bytes from a reply of {sent}: more than {factor} "
                        "times what it sent")


class NotNumbers(Exception):
    """An answer of a dtype off the allow-list: the implementation returned no numbers."""

    def __init__(self, name):
        super().__init__(name)
        self.name = inert(name if len(name) <= 40 else name[:40] + "…")


def to_target(a, name, backend):
    """``a`` (float64 or bool) as the bytes of dtype ``name``, rounded as the backend would.

    Torch casts float64 to float16 and bfloat16 through float32 (c10's conversions take a
    float); NumPy casts float64 to float16 directly. Both round to nearest even.
    """
    if a.dtype == bool:
        return np.ascontiguousarray(a, dtype=bool), "bool"
    if name == "bfloat16":
        bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
        out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
        out[np.isnan(a)] = 0x7FC0
        return out, name
    if name == "float64":  # nothing to round, nothing to overflow
        return np.ascontiguousarray(a, dtype=DTYPES[name]), name
    if name == "float16" and backend == "torch":
        a = a.astype(np.float32)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(a, dtype=DTYPES[name]), name


def pair():
    """A connected socket pair: (parent's end, worker's end)."""
    return socket.socketpair()
