"""A battery call as the arguments of ``F.scaled_dot_product_attention``.

What a subject sends an SDPA-style callable: the mask in the declared convention, the
keywords the call uses, the E == Ev twin of an E ≠ Ev call for a kernel that needs one (the
scores' 1/sqrt(E) kept by the scale, or by a rescaled query where the kernel takes none), the
parts the target declared unsupported refused before any call, the (N, L, H, E) layout and the
interleaved head groups where it declared them, and a self-attention call as SDPA on its
(N, 1, T, d) projections.
"""

import numpy as np

from detectors.kit.calls import Request
from detectors.kit.capabilities import INTERLEAVED
from detectors.kit.layout import heads_in, heads_last, interleaving, pad_last, twin
from detectors.kit.verdict import Unsupported


def keywords(call):
    """The SDPA keywords a call uses, which the callable must take."""
    names = []
    if call.mask is not None or call.bias is not None:
        names.append("attn_mask")
    names += [n for n, on in (("is_causal", call.causal), ("scale", call.scale is not None),
                              ("enable_gqa", call.gqa)) if on]
    return names


def can_pad(subject, call):
    """Can an E != Ev call go as an E == Ev twin? Ev < E pads V; Ev > E pads Q and K, and
    keeps the scores' 1/sqrt(E) (zeros change E, not Q·Kᵀ) by passing the scale, or, for a
    kernel that takes none, by sending Q multiplied by sqrt(Ev/E)."""
    return subject.pad or "e_ne_ev" in subject.unsupported


def scale_kept(subject):
    """Does the kernel take the scale, so that a padded twin can keep 1/sqrt(E) by it?"""
    return "scale" in subject.manifest.keywords and "scale" not in subject.unsupported


def build(subject, call, v, dtype, **kw):
    """The SDPA request of ``call`` with ``v`` as its value (an identity, to read weights)."""
    q, k, crop, q_factor = call.q, call.k, None, 1.0
    E, Ev = q.shape[-1], v.shape[-1]
    if E != Ev and can_pad(subject, call):  # the E == Ev twin: same math, cropped answer
        q, k, v, crop = twin(q, k, v)
        if "grad" in kw and kw["grad"] is not None:
            kw["grad"] = pad_last(kw["grad"], max(E, Ev))
        if Ev > E and call.scale is None and not scale_kept(subject):
            q_factor = np.sqrt(Ev / E)  # (c·q)·k / sqrt(Ev) = q·k / sqrt(E)
            q = q * q_factor
    kwargs = {}
    if call.mask is not None:
        kwargs["attn_mask"] = subject.keep_mask(call)
    if call.bias is not None:
        kwargs["attn_mask"] = call.bias
    if call.causal:
        kwargs["is_causal"] = True
    if call.scale is not None:
        kwargs["scale"] = call.scale
    elif crop is not None and Ev > E and q_factor == 1.0:
        kwargs["scale"] = 1 / np.sqrt(E)
    if call.gqa:
        kwargs["enable_gqa"] = True
    kwargs.update(kw.pop("extra", {}))
    lacking = [f for f, used in (("dropout", kwargs.get("dropout_p", 0)),
                                 ("autograd", kw.get("grad") is not None
                                  or kw.get("gradcheck")),
                                 ("float64", dtype == "float64")) if used]
    lacking = sorted(set(lacking) & subject.unsupported)
    if lacking:
        raise Unsupported(subject.current or call.name,
                          f"declared unsupported: {', '.join(lacking)}")
    regrouped = None
    if call.gqa and INTERLEAVED in subject.unsupported and k.shape[-3] < q.shape[-3]:
        order, regrouped = interleaving(q.shape[-3], k.shape[-3])  # sent order; its inverse
        q = heads_in(q, order)
        if "attn_mask" in kwargs:
            kwargs["attn_mask"] = heads_in(kwargs["attn_mask"], order)
        if kw.get("grad") is not None:
            kw["grad"] = heads_in(kw["grad"], order)
    swapped = subject.layout == "BLHE" and q.ndim >= 3
    if swapped:  # (..., H, L, E) -> (..., L, H, E), and the upstream gradient alike; the
        # mask stays (..., H, L, S), as (N, L, H, E) libraries take it (detectors.kit.layout)
        if kw.get("grad") is not None:  # (..., H, L, Ev), as the answer it multiplies
            kw["grad"] = heads_last(kw["grad"].reshape(q.shape[:-1] + v.shape[-1:]))
        q, k, v = (heads_last(a) for a in (q, k, v))
    request = Request("sdpa", (q, k, v), kwargs, dtype=dtype,
                      device=subject.target.device, layout=call.spec.layout, **kw)
    request.case, request.crop, request.swapped = call.name, (crop and (E, Ev, q_factor)), swapped
    request.regrouped = regrouped
    return request


def projected(call):
    """A self-attention call as an SDPA call on (N, 1, T, d) projections with is_causal."""
    return call.as_attention()


def unfold(a, shape):
    """(N, 1, T, d) back to (..., T, d); an answer of any other size is left for the checks."""
    want = shape + a.shape[-1:]
    return a.reshape(want) if a.size == int(np.prod(want)) and a.ndim >= 2 else a
