"""The fixed vocabulary a target uses to say what it does not support, and what a call uses.

One vocabulary for ``attnzoo check`` (a module-level ``ATTNZOO_UNSUPPORTED`` beside the
callable, or ``--unsupported``) and for the survey's adapters. A battery case that uses a
declared feature is ``unsupported``: set aside, never scored. A refusal at run time (a message
the target names in ``ATTNZOO_REFUSES``, or torch's "No available kernel") is ``unsupported``
for that case only.
"""

VOCABULARY = {
    "rank_other_than_4": "inputs of rank other than 4: (N, H, L, E) only",
    "e_ne_ev": "value head size Ev different from query/key head size E",
    "bool_mask": "a boolean attn_mask",
    "float_mask": "a float (additive) attn_mask",
    "per_head_mask": "a mask that differs between heads (a head axis of size > 1)",
    "rectangular": "L != S (self-attention blocks take one token sequence)",
    "is_causal": "is_causal=True",
    "is_causal_rectangular": "is_causal=True with L != S",
    "scale": "an explicit scale",
    "gqa": "enable_gqa=True (fewer key/value heads than query heads)",
    "dropout": "dropout_p > 0",
    "autograd": "gradients through torch autograd",
    "float64": "float64 inputs",
    # not a limit but a layout: the harness adapts the calls, and every case still runs
    "layout=BLHE": "query/key/value and the answer laid out (N, L, H, E), not (N, H, L, E): "
                   "the harness transposes them (the mask stays (N, H, L, S), as jax.nn and "
                   "keras take it)",
    # a convention, adapted by the harness like the layout: every case still runs
    "gqa=interleaved": "grouped query heads interleaved: query head h reads key/value head "
                       "h mod H_kv (key/value heads tiled, as x-transformers' "
                       "repeat('b kvh n d -> b (r kvh) n d') does), not h // (H_q / H_kv): the "
                       "harness reorders the query heads (and a per-head mask) in and the "
                       "answer out",
    # conventions of precision a library documents: every case still runs, judged by them
    "float64=computed-in-float32": "float64 inputs computed to float32 accuracy (a float32 "
                                   "softmax, as the library documents) and returned as float64",
    "float64=returned-as-float32": "float64 inputs computed and returned as float32 (the "
                                   "library's type promotion turns 64-bit floats into 32-bit)",
}
LAYOUTS = {"layout=BLHE": "BLHE"}  # declared word -> the layout's axis letters
INTERLEAVED = "gqa=interleaved"
COMPUTED_IN_FLOAT32 = "float64=computed-in-float32"
RETURNED_AS_FLOAT32 = "float64=returned-as-float32"
FLOAT64_AS_FLOAT32 = frozenset({COMPUTED_IN_FLOAT32, RETURNED_AS_FLOAT32})
FLOAT64_WORDS = {COMPUTED_IN_FLOAT32: "computed in float32",
                 RETURNED_AS_FLOAT32: "computed and returned as float32"}
# conventions the harness adapts or judges by, not limits
ADAPTED = frozenset(LAYOUTS) | {INTERLEAVED} | FLOAT64_AS_FLOAT32
# refusals every target may give: torch's SDPA dispatcher finding no kernel for a call
ALWAYS_REFUSED = ("No available kernel",)


def unknown(names):
    """The first name that is not in the vocabulary, or None."""
    return next((n for n in names if n not in VOCABULARY), None)


def parse(text):
    """``"dropout,gqa"`` as a tuple; ValueError naming the unknown word and the vocabulary."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = unknown(names)
    if bad is not None:
        raise ValueError(f"unknown capability {bad!r}: use one of {', '.join(VOCABULARY)}")
    return names


def layout(declared):
    """The layout a target's declarations name: "BHLE" (SDPA's, the default) or "BLHE"."""
    return next((LAYOUTS[d] for d in declared if d in LAYOUTS), "BHLE")


def limits(declared):
    """The declared words that are limits (cases set aside), without the adapted conventions."""
    return tuple(d for d in declared if d not in ADAPTED)


def grouping(declared):
    """How a target's grouped query heads read key/value heads: "contiguous" (SDPA's
    enable_gqa: head h reads h // (H_q / H_kv)) or "interleaved" (h mod H_kv)."""
    return "interleaved" if INTERLEAVED in declared else "contiguous"


def features(call):
    """The vocabulary features a battery call uses (a Call from detectors.kit.battery)."""
    used = set()
    if call.q.ndim != 4:
        used.add("rank_other_than_4")
    if call.q.shape[-1] != call.v.shape[-1]:
        used.add("e_ne_ev")
    mask = call.mask if call.mask is not None else call.bias
    if call.mask is not None:
        used.add("bool_mask")
    if call.bias is not None:
        used.add("float_mask")
    if mask is not None and mask.ndim >= 3 and mask.shape[-3] > 1:
        used.add("per_head_mask")
    if call.q.shape[-2] != call.k.shape[-2]:
        used.add("rectangular")
    if call.causal:
        used.add("is_causal")
        if call.q.shape[-2] != call.k.shape[-2]:
            used.add("is_causal_rectangular")
    if call.scale is not None:
        used.add("scale")
    if call.gqa:
        used.add("gqa")
    return used


def refusal(what, refuses):
    """Whether an implementation's failure text is one of the refusals named (or torch's)."""
    return any(r and r in what for r in tuple(refuses) + ALWAYS_REFUSED)


def computed_at(declared, dtype):
    """The format a target declares it computes ``dtype`` inputs in: float32 for float64 under
    either float64 convention, else ``dtype`` itself."""
    return "float32" if dtype == "float64" and FLOAT64_AS_FLOAT32 & set(declared) else dtype


def returned_as(declared, dtype):
    """The dtype a target declares its answers to ``dtype`` inputs come back in."""
    return "float32" if dtype == "float64" and RETURNED_AS_FLOAT32 in declared else dtype


def float64_inputs(declared):
    """What a target declares of its float64 inputs: "float64" (the contract), or one of
    :data:`FLOAT64_WORDS`' values."""
    return next((FLOAT64_WORDS[w] for w in sorted(FLOAT64_AS_FLOAT32 & set(declared))),
                "float64")
