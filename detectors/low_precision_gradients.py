"""At float16 and bfloat16 the gradients are as accurate as the same-precision reference's.

A gradient oracle by precision (S6, C6). The allowance is derived as FlashAttention's tests
derive theirs (https://github.com/Dao-AILab/flash-attention, ``tests/test_flash_attn.py``): run
a plain implementation at the same precision, measure its error against float64, and allow the
kernel a small multiple of it — 2× on the output there, 3× on the gradients, which is the
multiple used here — plus one unit in the last place of the largest gradient. The reference
is this repository's, run on the very same call. As the forward allowance does
(:mod:`detectors.kit.tolerance`), the unit is never less than an error no kernel at that
precision avoids, so a lucky reference cannot make the bound vanish: storing the exact
gradient at that precision (FA's ``dq_atol``), and the exact backward computed from P, dP and
dS stored at that precision, as every kernel stores them between its products. Nor is it less
than the error of dK and dV accumulated at that precision tile by tile, as PyTorch's own CPU
flash-attention backward accumulates them (``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``
in https://github.com/pytorch/pytorch): each tile of 32 queries adds its share, rounded, into
the half-precision gradient, the query heads of a group in turn. ``torch.nn.functional``'s
SDPA takes that kernel for float16 and bfloat16 on the CPU; with 16 query heads per key head
over 129 queries its dV is 80 roundings of a running sum away from float64, past 3× a
reference that sums once (``tests/test_properties.py`` reproduces its dV bit for bit).

Like FA's tests it runs at realistic sizes only — cases with keys past one tile of 64 or head
dims of 64 and more, which the ``standard`` and ``deep`` batteries have — because on quick's
handful of tiny numbers the errors are a few units in the last place and their ratio is
noise: the correct hand-written backward of ``zoo/decoys/tiled_backward.py`` goes past the
bound there on some seeds, while at standard sizes every correct implementation in the zoo
stays within it (``tests/test_properties.py`` runs them all).

A gradient the implementation already gets wrong at float64 is not judged here: that is a
wrong answer, ``correct_gradients``' finding, and its error weighed against a rounding-sized
bound would land on either side of it as the draw goes.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import explicit
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION
from detectors.kit.tolerance import EPS, gradient_allowance, scale
from detectors.kit.verdict import ImplementationFailure, NotApplicable, Unsupported
from reference.exact import softmax as exact_softmax

PROPERTY = "At float16/bfloat16 each gradient's error against float64 is at most 3× the same-precision reference's own."
CLAUSES = ("S6", "C6")
ORACLE = "gradient"
NEEDS = {"attention": ATTENTION.but(torch="autograd")}
MULTIPLE = 3  # FlashAttention's backward rule: 3× the same-precision reference's error
PRECISIONS = ("float16", "bfloat16")
ULPS = 1  # plus one unit in the last place of the largest gradient, as the forward allows four
CASES = 12  # at most this many realistic cases, spread from the smallest to the largest
MAGNITUDES = {"magnitude", "sharpness"}  # tags of the cases taken first: precision's own stress
QUERY_TILE = 32  # PyTorch's CPU flash backward: its smallest query tile, the most roundings


def stored(exact, dtype):
    """The error of merely storing ``exact`` at ``dtype`` (round to nearest): FA's dq_atol."""
    import torch

    t = torch.from_numpy(exact)
    return float((t.to(getattr(torch, dtype)).double() - t).abs().max()) if exact.size else 0.0


def _rounded(a, dtype):
    import torch

    return torch.from_numpy(a).to(getattr(torch, dtype)).double().numpy()


def stored_intermediates(call, upstream, exact, dtype):
    """Per input (q, k, v order): the error of the exact backward whose P, dP and dS are stored
    at ``dtype`` between its float64 products."""
    q, k, v = call.q, call.k, call.v
    g = q.shape[-3] // k.shape[-3] if call.gqa else 1
    if g > 1:
        k, v = (np.repeat(a, g, axis=-3) for a in (k, v))  # (..., H_q, S, ·)
    factor = 1 / np.sqrt(q.shape[-1]) if call.scale is None else call.scale
    scores = (q * factor) @ np.swapaxes(k, -1, -2)  # (..., L, S)
    if call.bias is not None:
        scores = scores + call.bias
    if call.mask is not None:
        scores = np.where(call.mask, scores, -np.inf)
    p = _rounded(exact_softmax(scores), dtype)  # (..., L, S)
    dp = _rounded(upstream @ np.swapaxes(v, -1, -2), dtype)  # (..., L, S)
    ds = _rounded(p * (dp - (p * dp).sum(-1, keepdims=True)), dtype)
    grads = [ds @ k * factor, np.swapaxes(ds, -1, -2) @ q * factor,
             np.swapaxes(p, -1, -2) @ upstream]  # dQ (..., L, E), dK, dV per query head
    if g > 1:
        grads[1:] = [a.reshape(a.shape[:-3] + (-1, g) + a.shape[-2:]).sum(-3) for a in grads[1:]]
    errors = [_error(a, want) for a, want in zip(grads, exact)]
    tiled = [accumulated_by_tiles(ds, q * factor, g, dtype),  # dK = Σ dSᵀ Q·scale
             accumulated_by_tiles(p, upstream, g, dtype)]  # dV = Σ Pᵀ dO
    errors[1:] = [max(e, _error(t, want)) for e, t, want in zip(errors[1:], tiled, exact[1:])]
    return errors


def _error(a, want):
    return float(np.abs(a - want).max()) if want.size else 0.0


def accumulated_by_tiles(weights, rows, g, dtype, tile=QUERY_TILE):
    """Σ over queries of weightsᵀ @ rows for each key/value head, (..., H_kv, S, ·), summed as
    a tiled kernel sums it: the share of each tile of ``tile`` queries rounded to ``dtype`` and
    added into a ``dtype`` running sum, the ``g`` query heads of a group in turn. ``weights``
    is (..., H_q, L, S), ``rows`` (..., H_q, L, ·), query head i reading key/value head i // g."""
    w, r = (a.reshape(a.shape[:-3] + (-1, g) + a.shape[-2:]) for a in (weights, rows))
    total = np.zeros(w.shape[:-3] + (w.shape[-1], r.shape[-1]))  # (..., H_kv, S, ·)
    for h in range(g):
        for start in range(0, w.shape[-2], tile):
            queries = slice(start, start + tile)
            share = np.swapaxes(w[..., h, queries, :], -1, -2) @ r[..., h, queries, :]
            total = _rounded(total + _rounded(share, dtype), dtype)
    return total


def realistic(calls, n=CASES):
    """Cases with keys past one tile of 64 or head dims of 64 and more: those whose magnitudes
    stress precision (``MAGNITUDES``, up to half of ``n``) and others, each spread over sizes."""
    big = [c for c in calls if c.k.shape[-2] > 64 or c.q.shape[-1] >= 64]
    stress = _spread([c for c in big if MAGNITUDES & set(c.spec.tags)], n // 2)
    rest = _spread([c for c in big if c not in stress], n - len(stress))
    return sorted(stress + rest, key=big.index)


def _spread(items, k):
    """``k`` of ``items`` (sorted by size) from the first to the last, or all of them."""
    if len(items) <= k:
        return items
    return [items[round(i * (len(items) - 1) / max(k - 1, 1))] for i in range(k)]


def wrong_already(subject, reference, call, same, upstream, exact):
    """The gradients the subject gets wrong at float64 as well, beyond the precision it was
    measured to compute float64 at: a wrong answer, correct_gradients' finding, not a loss of
    precision. Judged here, such an error would be weighed against a rounding-sized bound
    and land on either side of it as the draw goes."""
    if subject.out_of_scope("float64"):
        return set()  # --dtype scopes the run: no float64 call to tell them apart
    try:
        grads = subject.attend(call, dtype="float64", grad=upstream).grads or {}
    except (ImplementationFailure, Unsupported):
        return set()  # what float64 does is the other detectors' finding
    precision = subject.judge.effective("float64")
    low = None if precision == "float64" else subject.judge.gradients(call, reference.attend(
        same, dtype=precision, grad=upstream).grads, upstream)
    return {name for name, want in exact.items()
            if (got := grads.get(name)) is not None and np.shape(got) == np.shape(want)
            and not expect.within(got, want, gradient_allowance(
                want, None if low is None else low[name], precision))}


def units(reference, same, upstream, exact, dtype):
    """Per input gradient: the error unit at ``dtype`` (the reference's own, never less than
    what no kernel at that precision avoids)."""
    plain = reference.attend(same, dtype=dtype, grad=upstream).grads
    names = list(exact)[:3]  # query, key, value (a float mask is not an argument)
    floor = stored_intermediates(same, upstream, [exact[n] for n in names], dtype)
    return {n: max(float(np.abs(plain[n] - exact[n]).max()), stored(exact[n], dtype), f)
            for n, f in zip(names, floor)}


def tolerance(unit, exact, dtype):
    """MULTIPLE units, plus ULPS units in the last place of the largest gradient."""
    return MULTIPLE * unit + ULPS * EPS[dtype] * scale(exact)


def check(subject, battery):
    reference = subject.judge.reference("torch")
    alignment = subject.target.causal_alignment
    rng = np.random.default_rng(battery.seed)
    calls = subject.cases(battery)
    if not realistic(calls):
        raise NotApplicable("no case of realistic size (keys past 64 or head dims of 64): "
                            "run it at --depth standard or deep")
    for call in subject.each(realistic(calls)):
        with subject.trial(call):
            upstream = grid(rng, subject.expected(call)[0].shape)
            same = explicit(call, alignment)  # the reference is top-left
            raw = reference.attend(same, dtype="float64", grad=upstream).grads
            # the reference gives a row with no allowed key zeros: the declared convention's
            # rows are judged, the error units are the reference's own
            exact = subject.judge.gradients(call, raw, upstream)
            wrong = wrong_already(subject, reference, call, same, upstream, exact)
            for dtype in PRECISIONS:
                answer = subject.attend(call, dtype=dtype, grad=upstream)
                for name, unit in units(reference, same, upstream, raw, dtype).items():
                    got = (answer.grads or {}).get(name)
                    if got is None or name in wrong:
                        continue  # a missing or wrong gradient is correct_gradients' finding
                    atol = tolerance(unit, exact[name], dtype)
                    with subject.case(f"{call.name} at {dtype}", answer,
                                      relation=f"gradient of sum(out * G) at {dtype}, within "
                                               f"{MULTIPLE}x the reference's error at {dtype}"):
                        expect.close(got, exact[name], atol, f"d{name}")
