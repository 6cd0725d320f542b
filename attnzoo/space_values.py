"""The values of the input space (``reference.space``) one recorded call uses.

``attnzoo coverage`` (:mod:`attnzoo.coverage`) reads every call the detectors send with
:func:`sdpa_values` or :func:`lesson_values`, and every detector's run for the place of each call
in its sequence (:func:`sequence`): always from the arrays and keywords actually sent, never from
a case's or a detector's name.
"""

import math

import numpy as np

from detectors.kit.memory import constant_axes
from reference.space import EXACT_INTEGERS, LARGEST_FINITE, SMALLEST_NORMAL


def _prime(n):
    return n > 2 and all(n % p for p in range(2, math.isqrt(n) + 1))


def _pow2(n):
    return n >= 8 and n & (n - 1) == 0


def sizes(n, long=True):
    """The size values ``n`` has (reference.space.SIZES)."""
    found = {v for v, ok in (("1", n == 1), ("prime", _prime(n)), ("2^k", _pow2(n)),
                             ("2^k+1", _pow2(n - 1)), ("2^k-1", _pow2(n + 1)), (">64", n > 64),
                             (">1024", long and n > 1024)) if ok}
    return found


def _rows_empty(mask):
    if mask.dtype == bool:
        return bool((~mask).all(axis=-1).any())
    return bool(np.isneginf(mask).all(axis=-1).any())


def _scores(q, k, factor):
    """(max |q·k|, max |scaled scores|) over the call."""
    if q.ndim != k.ndim:
        k = k.reshape((1,) * (q.ndim - k.ndim) + k.shape)
    if q.ndim >= 3 and k.shape[-3] not in (1, q.shape[-3]):  # grouped heads
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    raw = float(np.abs(q @ np.swapaxes(k, -1, -2)).max(initial=0.0))
    return raw, raw * abs(factor)


def sdpa_values(request):
    """``{(axis, value)}`` an SDPA request uses."""
    q, k, v = request.args[:3]
    kw = request.kwargs
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    found = {("L", s) for s in sizes(L)} | {("S", s) for s in sizes(S)}
    found |= {("E", s) for s in sizes(E, long=False) - {">64"}} | ({("E", ">128")} if E > 128
                                                                    else set())
    found |= {("Ev", "=E" if Ev == E else "!=E")} | ({("Ev", ">128")} if Ev > 128 else set())
    found.add(("batch", "unbatched" if q.ndim < 4 else "rank5" if q.ndim > 4
               else "1" if q.shape[0] == 1 else ">1"))
    if int(np.prod(q.shape[:-2])) > 65535:
        found.add(("batch", ">65535 slices"))
    H = q.shape[-3] if q.ndim >= 3 else 1
    found |= {("heads", h) for h, ok in (("1", H == 1), (">1", H > 1), (">=16", H >= 16)) if ok}
    Hk = k.shape[-3] if k.ndim >= 3 else 1
    g = H // Hk if kw.get("enable_gqa") and Hk else 1
    found.add(("gqa", "off" if g == 1 else "mqa" if Hk == 1 else "g=2" if g == 2 else "g>=4"))
    found.add(("dtype", request.dtype))
    found.add(("layout", _layout(request)))
    mask = kw.get("attn_mask")
    if mask is None:
        found.add(("attn_mask", "none"))
    else:
        mask = np.asarray(mask)
        found.add(("attn_mask", "bool" if mask.dtype == bool else "float"))
        if mask.dtype != bool and np.isneginf(mask).any():
            found.add(("attn_mask", "float -inf"))
        if mask.ndim == 2:
            found.add(("attn_mask", "2-D"))
        if mask.ndim >= 3 and (mask != mask[..., :1, :, :]).any():  # heads that differ
            found.add(("attn_mask", "per-head"))
        if _rows_empty(mask):
            found.add(("attn_mask", "empty row"))
    found.add(("is_causal", "off" if not kw.get("is_causal") else
               "L=S" if L == S else "L<S" if L < S else "L>S"))
    scale = kw.get("scale")
    found.add(("scale", "default" if scale is None else "0" if scale == 0 else "explicit"))
    p = kw.get("dropout_p") or 0.0
    found.add(("dropout_p", "0" if p == 0 else "1" if p >= 1 else ">=0.9" if p >= 0.9
               else "(0,1)"))
    raw, scaled = _scores(q, k, 1 / math.sqrt(E) if scale is None else scale)
    found.add(("scores", "past float16" if raw > 65504 else "peaked" if scaled >= 8
               else "flat" if scaled < 1 / 8 else "ordinary"))
    found |= _asked(request)
    return found | _limits(request.dtype, (q, k, v, mask), max(L, S))


def _limits(dtype, arrays, length):
    """The ``limits`` values a call at ``dtype`` reaches: entries near the format's largest
    finite value or below its smallest normal, and lengths past its exact integers."""
    floats = [np.abs(np.asarray(a, dtype=float)) for a in arrays
              if a is not None and np.asarray(a).dtype != bool]
    floats = [a[np.isfinite(a)] for a in floats]
    found = {("limits", "past exact integers")} if length > EXACT_INTEGERS[dtype] else set()
    if any(a.size and a.max() >= LARGEST_FINITE[dtype] / 4 for a in floats):
        found.add(("limits", "largest finite"))
    if any(((a > 0) & (a < SMALLEST_NORMAL[dtype])).any() for a in floats):
        found.add(("limits", "smallest normal"))
    return found


def _layout(request):
    """The layout the request's arrays went in: an expansion where no array has an axis to
    expand along sends them contiguous."""
    arrays = [a for a in list(request.args) + list(request.kwargs.values())
              if isinstance(a, np.ndarray)]
    if request.layout == "expanded" and not any(constant_axes(a) for a in arrays):
        return "contiguous"
    return request.layout


def _asked(request):
    dropout = bool(request.kwargs.get("dropout_p"))
    return {("requests", v) for v, ok in (("seeded", request.seed is not None),
                                          ("not reseeded", dropout and request.seed is None),
                                          ("kept", request.keep),
                                          ("refilled", request.refill is not None),
                                          ("answer overwritten", request.overwrite is not None),
                                          ("inputs read back", request.inputs),
                                          ("another call before the backward",
                                           request.between is not None)) if ok}


def _fingerprint(request):
    """What makes two requests the same call: function, format, arrays' values, keywords."""
    def part(a):
        a = np.asarray(a) if isinstance(a, (np.ndarray, list)) else a
        return (a.dtype.str, a.shape, a.tobytes()) if isinstance(a, np.ndarray) else repr(a)

    return hash((request.fn, request.dtype, tuple(part(a) for a in request.args),
                 tuple((k, part(v)) for k, v in sorted(request.kwargs.items())),
                 request.grad is not None, request.gradcheck))


def sequence(sent):
    """Per request of one detector's run, in order, the ``requests`` values its place in the
    sequence reaches: the same call again right after itself ("repeated"), or with other calls
    between ("repeated later"); each repeat arrives as new objects unless it is refilled."""
    last, out = {}, []
    for i, request in enumerate(sent):
        key = _fingerprint(request)
        found = set()
        if key in last:
            found.add(("requests", "repeated" if last[key] == i - 1 else "repeated later"))
        last[key] = i
        out.append(found)
    return out


def lesson_values(request):
    """``{(axis, value)}`` a lesson-contract request uses."""
    found = {("function", request.fn), ("dtype", request.dtype)}
    if request.fn == "attention":
        q, k, v = request.args[:3]
        mask = request.args[3] if len(request.args) > 3 else None
        found.add(("rank", "2-D" if q.ndim == 2 else "batched"))
        found |= {("d", "1")} if q.shape[-1] == 1 else set()
        found |= {("d", "d_k!=d_v")} if q.shape[-1] != v.shape[-1] else set()
        lengths = (q.shape[-2], k.shape[-2])
    elif request.fn == "causal_self_attention":
        x = request.args[0]
        found.add(("rank", "2-D" if x.ndim == 2 else "batched"))
        lengths, mask = (x.shape[-2],), None
    else:
        return found
    for T in lengths:
        found |= {("T", t) for t, ok in (("1", T == 1), ("small", 2 <= T <= 16), (">64", T > 64))
                  if ok}
    found.add(("mask", "none" if mask is None else "empty row"
               if _rows_empty(np.asarray(mask)) else "bool"))
    return found
