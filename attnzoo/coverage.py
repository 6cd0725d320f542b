"""``attnzoo coverage``: which detectors reach each value of the input space, read off the calls.

Coverage is measured, not declared: every detector runs on the reference at a depth, every
call it sends is recorded, and each call is read for the values of ``reference.space`` it
uses — from the arrays and keywords actually sent, never from a case's or a detector's name.
A call with an upstream gradient (or a gradcheck) reaches values *through gradients*; any other
call reaches them *forward*. A value of the space that no detector reaches at deep, and that
does not say why (``Value.gap``, ``Value.no_gradient``), is a gap: ``coverage_gaps`` lists it
and the coverage test fails on it.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

from attnzoo.matrix.model import rows, subject_for
from attnzoo.runner import run
from detectors import all_detectors
from detectors.kit.battery import Battery
from detectors.kit.depths import DEPTHS
from detectors.kit.memory import constant_axes
from reference.space import BACKWARD, EXACT_INTEGERS, LARGEST_FINITE, SMALLEST_NORMAL, SPACES

ROWS = {"sdpa": "reference-sdpa", "lesson": "reference-numpy"}


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
                                          ("inputs read back", request.inputs)) if ok}


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


class Recorder:
    """An executor that notes every request it runs, then runs it."""

    def __init__(self, executor, sink):
        self.executor, self.sink = executor, sink

    def run(self, request):
        self.sink.append(request)
        return self.executor.run(request)

    def __getattr__(self, name):
        return getattr(self.executor, name)


def measure(contract, depth, seed=0):
    """``{"axis:value": {"forward": [detectors], "backward": [detectors]}}`` on the reference."""
    row = next(r for r in rows(depth) if r.label == ROWS[contract])
    read = sdpa_values if contract == "sdpa" else lesson_values
    reached = {}
    battery = Battery(seed, depth=depth)
    for detector in all_detectors():
        subject, sent = subject_for(row), []
        subject.executor = Recorder(subject.executor, sent)
        run(detector, subject, battery)
        for request, place in zip(sent, sequence(sent)):
            way = "backward" if request.grad is not None or request.gradcheck else "forward"
            for axis, value in read(request) | place:
                reached.setdefault(f"{axis}:{value}", {"forward": set(), "backward": set()})[
                    way].add(detector.NAME)
    return {k: {w: sorted(d) for w, d in ways.items()} for k, ways in reached.items()}


def coverage(depths=DEPTHS, seed=0, contracts=tuple(SPACES)):
    """``{contract: {depth: measure(...)}}``."""
    return {c: {d: measure(c, d, seed) for d in depths} for c in contracts}


def gaps(found, contract, depth="deep"):
    """Values of ``contract``'s space that no relation reaches at ``depth`` and that do not say
    why: ``[(axis:value, "forward" | "backward")]``."""
    reached, missing = found[contract][depth], []
    for axis in SPACES[contract]:
        for value in axis.values:
            key = f"{axis.name}:{value.name}"
            ways = reached.get(key, {"forward": [], "backward": []})
            if not ways["forward"] and not value.gap:
                missing.append((key, "forward"))
            if not ways["backward"] and not (value.no_gradient or value.gap
                                             or BACKWARD[contract]):
                missing.append((key, "backward"))
    return missing


def stale(found, contract, depth="deep"):
    """Values that say why nothing reaches them although something does: ``[(value, way)]``."""
    reached, out = found[contract][depth], []
    for axis in SPACES[contract]:
        for value in axis.values:
            ways = reached.get(f"{axis.name}:{value.name}", {"forward": [], "backward": []})
            if value.gap and ways["forward"]:
                out.append((f"{axis.name}:{value.name}", "forward"))
            if value.no_gradient and ways["backward"]:
                out.append((f"{axis.name}:{value.name}", "backward"))
    return out


def problems(found, depth="deep"):
    """One line per gap (a value nothing reaches that says no reason) and per stale reason."""
    lines = []
    for contract in found:
        lines += [f"{contract} {key}: no {'gradient' if way == 'backward' else 'forward'} "
                  "relation reaches it at deep, and reference/space.py says no reason"
                  for key, way in gaps(found, contract, depth)]
        lines += [f"{contract} {key}: reached {way} at deep, yet reference/space.py says "
                  "nothing reaches it: drop the reason"
                  for key, way in stale(found, contract, depth)]
    return lines


def render(found):
    """The text table: per contract and axis value, how many detectors reach it forward and
    through gradients at each depth, then who reaches it at the deepest depth measured."""
    lines = []
    for contract, by_depth in found.items():
        depths = list(by_depth)
        lines.append(f"{contract} contract: detectors reaching each value, forward / through "
                     f"gradients, at {', '.join(depths)}")
        for axis in SPACES[contract]:
            lines.append(f"  {axis.name} ({axis.clause}, {axis.about})")
            for value in axis.values:
                key = f"{axis.name}:{value.name}"
                counts = []
                for d in depths:
                    ways = by_depth[d].get(key, {"forward": [], "backward": []})
                    counts.append(f"{len(ways['forward']):>2}/{len(ways['backward']):<2}")
                last = by_depth[depths[-1]].get(key, {"forward": [], "backward": []})
                note = value.gap and f"gap: {value.gap}"
                who = ", ".join(last["forward"][:6]) + (" …" if len(last["forward"]) > 6 else "")
                lines.append(f"    {value.name:<16} {'  '.join(counts)}  "
                             f"{note or who or '(none)'}")
    return "\n".join(lines)


def to_json(found, seed):
    return json.dumps({"seed": seed, "coverage": found}, indent=1, sort_keys=True) + "\n"


def command(depths, contracts, seed, as_json, output):
    """``attnzoo coverage``: print the table (or JSON), write JSON where ``output`` names, and
    exit 1 when the deep coverage has a gap or a stale reason (one line each on stderr)."""
    depths = tuple(d for d in DEPTHS if d in (depths or DEPTHS))
    found = coverage(depths, seed, tuple(dict.fromkeys(contracts or tuple(SPACES))))
    text = to_json(found, seed)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    print(text if as_json else render(found), end="" if as_json else "\n")
    lines = problems(found) if "deep" in depths else []
    for line in lines:
        print(f"coverage: {line}", file=sys.stderr)
    return 1 if lines else 0
