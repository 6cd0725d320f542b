"""What a sent case uses, as data: one row per feature, read from the battery's specs.

Each row is (name, the phrase the diagnosis prints, a test of the call and alignment). The tests
read the declarative fields of ``detectors.kit.specs.Spec`` (``gqa``, ``causal``, ``bias``,
``layout``, ``unbatched``, ``tags``, the shapes) and the arrays actually sent, so a call a
detector derived from a case (every key masked, say) is described by what it is. A second table
reads the request: its dtype, dropout and gradients. The order of the rows breaks ties: more
specific features first.
"""

import numpy as np

from detectors.kit.allowed import empty_rows
from detectors.kit.battery import Call
from detectors.kit.memory import constant_axes


def _mask(c):
    return c.mask if c.mask is not None else c.bias


def _expanded(c):
    arrays = (c.q, c.k, c.v, _mask(c))
    return c.spec.layout == "expanded" and any(constant_axes(a) for a in arrays if a is not None)


def _per_head(c):
    m = _mask(c)
    return m is not None and c.q.ndim >= 4 and m.ndim >= 3 and m.shape[-3] > 1


SPEC = (  # (name, phrase, test(call, alignment)) for attention calls
    ("no_allowed_key", "rows with no allowed key (a query every key is masked from)",
     lambda c, a: bool(empty_rows(c, a).any())),
    ("gqa", "grouped-query attention (enable_gqa, fewer key/value heads than query heads)",
     lambda c, a: c.spec.gqa),
    ("is_causal_rectangular", "is_causal with L ≠ S",
     lambda c, a: c.spec.causal and c.q.shape[-2] != c.k.shape[-2]),
    ("per_head_mask", "a mask that differs between heads", lambda c, a: _per_head(c)),
    ("float_mask", "a float (additive) attn_mask", lambda c, a: c.bias is not None),
    ("half_magnitudes", "raw q·k past float16's range (scaled scores moderate)",
     lambda c, a: "magnitude" in c.spec.tags),
    ("sharp_heads", "heads of different sharpness (scores in the tens beside a diffuse head)",
     lambda c, a: bool(c.spec.head_logits)),
    ("zero_scale", "scale=0", lambda c, a: c.spec.scale == 0),
    ("scale", "an explicit scale", lambda c, a: c.spec.scale is not None),
    ("is_causal", "is_causal=True", lambda c, a: c.spec.causal),
    ("wide_heads", "a head size past 128", lambda c, a: max(c.q.shape[-1], c.v.shape[-1]) > 128),
    ("many_keys", "more than 64 keys (several tiles)", lambda c, a: c.k.shape[-2] > 64),
    ("rank_5", "more than one batch axis (rank 5)", lambda c, a: c.q.ndim >= 5),
    ("unbatched", "unbatched inputs (fewer than four axes)", lambda c, a: c.spec.unbatched),
    ("broadcast_kv", "keys and values broadcast over the queries' batch",
     lambda c, a: c.k.ndim < c.q.ndim),
    ("offset_inputs", "inputs at a storage offset (slices of a wider buffer)",
     lambda c, a: c.spec.layout == "offset"),
    ("expanded_inputs", "inputs expanded with stride 0 (keys, values or a mask shared by the "
     "batch)", lambda c, a: _expanded(c)),
    ("strided", "non-contiguous inputs", lambda c, a: c.spec.layout != "contiguous"),
    ("large_scores", "large scores (|q·k| in the tens)",
     lambda c, a: c.spec.logits * c.spec.key_logits >= 8 and "magnitude" not in c.spec.tags),
    ("tiny_scores", "tiny scores", lambda c, a: c.spec.logits * c.spec.key_logits < 1 / 8),
    ("single_query", "a single query (L = 1, a decode step)", lambda c, a: c.q.shape[-2] == 1),
    ("single_key", "a single key (S = 1)", lambda c, a: c.k.shape[-2] == 1),
    ("bool_mask", "a boolean attn_mask", lambda c, a: c.mask is not None),
    ("e_ne_ev", "a value head size Ev ≠ E", lambda c, a: c.q.shape[-1] != c.v.shape[-1]),
    ("rectangular", "L ≠ S", lambda c, a: c.q.shape[-2] != c.k.shape[-2]),
)
REQUEST = (  # (name, phrase, test(request, the run's dtype)) for every request
    ("dropout", "dropout_p > 0", lambda r, d: bool(r.kwargs.get("dropout_p", 0))),
    ("gradients", "gradients through the call",
     lambda r, d: r.grad is not None or r.gradcheck),
    ("self_attention", "the causal self-attention function",
     lambda r, d: r.fn == "causal_self_attention"),
    ("any_mask", "a mask of any kind (attn_mask, is_causal, a lesson mask or causal "
     "self-attention)", lambda r, d: r.fn == "causal_self_attention" or len(r.args) > 3
     or "attn_mask" in r.kwargs or bool(r.kwargs.get("is_causal"))),
)
# not a feature of the case but of its process: the worker died on this call after answering
# others, and the same call answers alone in a fresh one (attnzoo.sandbox.isolated)
EARLIER_CALLS = "after_earlier_calls"
ORDER = [EARLIER_CALLS] + [n for n, _, _ in SPEC] + ["dtype"] + [n for n, _, _ in REQUEST]
PHRASES = {n: p for n, p, _ in SPEC + REQUEST}
PHRASES[EARLIER_CALLS] = ("a process that had answered earlier calls (each of these calls "
                          "answers when sent alone to a fresh process)")


def phrase(name):
    """How the diagnosis says a feature: ``dtype:float16`` reads "float16 inputs"."""
    return f"{name.split(':', 1)[1]} inputs" if name.startswith("dtype:") else PHRASES[name]


def rank(name):
    """Position in the tables: the tie-break when two features explain the same cases."""
    return ORDER.index(name.split(":", 1)[0])


def of(call, request, dtype, alignment="top-left"):
    """The sorted feature names of one sent case (``dtype`` is the run's)."""
    used = set()
    if isinstance(call, Call):
        used |= {n for n, _, test in SPEC if test(call, alignment)}
    used |= {n for n, _, test in REQUEST if test(request, dtype)}
    if request.dtype != dtype and request.dtype in ("float16", "bfloat16", "float32", "float64"):
        used.add(f"dtype:{request.dtype}")
    return sorted(used, key=rank)


def size(call):
    """How big a case is, to pick the smallest of a group."""
    return int(call.size()) if hasattr(call, "size") else int(np.iinfo(np.int32).max)
