"""How close is close enough, derived rather than tuned.

At float64 every correct algorithm agrees with exact attention to about 1e-15; the allowance
below is a hundred thousand times wider and still a thousand times narrower than a float32
shortcut. At float32, float16 and bfloat16 the allowance is derived as flash-attention's tests
derive theirs: run this repository's reference at the same precision, measure its error against
the float64 loop oracle on the very same call, and allow a small multiple of it. Because one
implementation can be lucky where another, equally correct, is not, the unit is the larger of
that error and the error of exact attention whose scores (and projections) are merely stored
at that precision — the error no implementation at that precision can avoid. It is never less
than a first-order bound on summing the dot products in float32, as real kernels do, and a few
units in the last place of the output are always allowed.
"""

import functools

import numpy as np

from detectors.kit.battery import SelfCall, SoftmaxCall
from detectors.kit.positions import probed

FLOAT64_ATOL = 1e-10  # times max(1, |expected|)
MULTIPLE = 4  # of the reference's own error at the call's precision
ULPS = 4  # plus this many units in the last place of the output's magnitude
EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def scale(expected):
    finite = np.abs(expected[np.isfinite(expected)])
    return max(1.0, float(finite.max())) if finite.size else 1.0


def strict(call, expected, dtype, what="out", reference_error=0.0):
    """The largest absolute error correct code makes at ``dtype`` in ``what`` ("out" or
    "weights") of ``call`` whose exact answer is ``expected``, given the reference's own error
    at ``dtype`` on it: what precision properties (and the precision measurement) judge by."""
    if dtype == "float64":
        return FLOAT64_ATOL * scale(expected)
    floor = ULPS * EPS[dtype] * scale(expected)
    unit = max(reference_error, rounding_error(call, dtype, what))
    return max(MULTIPLE * unit, accumulation_bound(call, what)) + floor


def gradient_allowance(expected, low=None, dtype="float32"):
    """The error allowed in a gradient whose float64 value is ``expected``: float64's when
    ``low`` is None, else a small multiple of how far the reference's own gradient at the
    lower precision (``low``) is from it, plus GRADIENT_ULPS units in the last place of
    ``dtype`` (a backward pass sums products of the forward's rounded weights in more orders
    than the forward does: a correct float32 kernel was measured up to 13 such units and 6.2
    times the reference's error off, against errors of order 1 for a wrong backward)."""
    if low is None:
        return FLOAT64_ATOL * scale(expected)
    with np.errstate(invalid="ignore"):
        unit = float(np.nanmax(np.abs(np.asarray(low) - expected), initial=0.0))
    return GRADIENT_MULTIPLE * unit + GRADIENT_ULPS * EPS[dtype] * scale(expected)


GRADIENT_MULTIPLE = 8  # of the reference's own gradient error at that precision
GRADIENT_ULPS = 32


@functools.lru_cache(maxsize=8192)
def accumulation_bound(call, what):
    """First-order bound on the error of summing the dot products in float32 accumulators.

    A score s_ij = scale·Σ_e q_ie k_je summed in float32 is off by at most
    δ_ij = n·eps·scale·Σ_e |q_ie||k_je| (n terms); softmax turns that into |Δw_ij| <= 2 w_ij
    max_k δ_ik, and the output into 2·max_k δ_ik·Σ_j w_ij |v_j| plus S·eps·Σ_j w_ij |v_j| for
    its own sum. Real kernels accumulate in float32 (or better) at every input precision.
    """
    eps = EPS["float32"]
    if isinstance(call, SoftmaxCall):
        return 0.0
    if isinstance(call, SelfCall):
        x = np.abs(call.x)
        q_abs, k_abs, v_abs = x @ np.abs(call.w_q), x @ np.abs(call.w_k), x @ np.abs(call.w_v)
        n = call.w_q.shape[0] + call.w_q.shape[1]  # the projection's sum, then the score's
        factor = 1 / np.sqrt(call.w_q.shape[1])
        weights = call.expected()[1]
        v_abs = v_abs * (1 + call.w_v.shape[0] * eps)
    else:
        k_abs = np.abs(call.k)
        if call.gqa:
            k_abs = np.repeat(k_abs, call.q.shape[-3] // k_abs.shape[-3], axis=-3)
        q_abs, v_abs = np.abs(call.q), np.abs(call.v_per_query_head())
        n = call.q.shape[-1]
        factor = 1 / np.sqrt(n) if call.scale is None else abs(call.scale)
        weights = call.expected("top-left")[1]
    delta = n * eps * factor * (q_abs @ np.swapaxes(k_abs, -1, -2))  # (..., L, S)
    seen = np.where(weights > 0, delta, 0.0).max(axis=-1, keepdims=True)  # (..., L, 1)
    if what == "weights":
        return float((2 * seen * weights).max(initial=0.0))
    mixed = weights @ v_abs  # (..., L, Ev): Σ_j w_ij |v_jc|
    S = weights.shape[-1]
    return float(((2 * seen + S * eps) * mixed).max(initial=0.0))


@functools.lru_cache(maxsize=8192)
def rounding_error(call, dtype, what):
    """Max error of exact attention whose intermediates are stored at ``dtype``.

    The scores (and, for self-attention, the projections) are rounded to ``dtype`` and the
    scale factor is taken one rounding off either way — the least any implementation at that
    precision can be expected to be off by.
    """
    if isinstance(call, SoftmaxCall):
        return _err(_softmax(_round(call.x, dtype)), call.expected())
    if isinstance(call, SelfCall):
        q, k, v = (_round(a, dtype) for a in call.projections())
        out, weights = call.expected()
        T = q.shape[-2]
        keep, bias, factor = np.tril(np.ones((T, T), dtype=bool)), None, 1 / np.sqrt(q.shape[-1])
    else:
        out, weights = call.expected("top-left")
        q, k, v = call.q, call.k, call.v_per_query_head()
        if call.gqa:
            k = np.repeat(k, call.q.shape[-3] // k.shape[-3], axis=-3)
        factor = 1 / np.sqrt(q.shape[-1]) if call.scale is None else call.scale
        keep = np.ones(q.shape[-2:-1] + k.shape[-2:-1], dtype=bool)
        if call.mask is not None:
            keep = keep & call.mask
        if call.causal:
            keep = keep & np.tril(np.ones(keep.shape[-2:], dtype=bool))
        bias = call.bias
    if _scores(q, k) > SAMPLED_ROUNDING:  # rows are independent: measure the probed ones
        rows = probed(q.shape[-2], name=getattr(call, "name", ""))
        q, out, weights, keep, bias = (_rows(a, rows, q.shape[-2])
                                       for a in (q, out, weights, keep, bias))
    worst = 0.0
    raw = q @ np.swapaxes(k, -1, -2)  # (..., L, S), once for both roundings of the scale
    for off in (1 - EPS[dtype], 1 + EPS[dtype]):
        scores = _round(raw * (factor * off), dtype)  # (..., L, S)
        if bias is not None:
            scores = _round(scores + bias, dtype)
        w = _softmax(np.where(keep & ~np.isneginf(scores), scores, -np.inf))
        worst = max(worst, _err(w, weights) if what == "weights" else _err(w @ v, out))
    return worst


# Beyond this many scores the rounding error is measured on the query rows that
# detectors.kit.positions probes (tile boundaries, both ends, a seeded sample) rather than on
# every row: each row's error depends on that row alone, so the sample's error is exactly
# those rows' error, and the reference's own error (measured on every row) still bounds the
# unit from below. Every quick and standard case stays below it and is measured in full.
SAMPLED_ROUNDING = 1 << 18


def _scores(q, k):
    lead = max(int(np.prod(q.shape[:-2])), int(np.prod(k.shape[:-2])))
    return lead * q.shape[-2] * k.shape[-2]


def _rows(a, rows, L):
    """``a`` at query rows ``rows`` when its row axis is really L long (not broadcast)."""
    if a is None or a.ndim < 2 or a.shape[-2] != L:
        return a
    return np.take(a, rows, axis=-2)


def _round(a, dtype):
    """``a`` rounded to ``dtype`` (to nearest, ties to even) and back to float64."""
    a = np.asarray(a, dtype=np.float64)
    if dtype != "bfloat16":
        return a.astype(dtype).astype(np.float64)
    bits = a.astype(np.float32).view(np.uint32)  # bfloat16 is the top half of a float32
    finite = np.isfinite(a)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(finite, rounded.view(np.float32), a).astype(np.float64)


def _softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0.0, m))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def _err(got, want):
    with np.errstate(invalid="ignore"):
        return float(np.nanmax(np.abs(got - want), initial=0.0))
