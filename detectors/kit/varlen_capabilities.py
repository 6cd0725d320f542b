"""The fixed vocabulary a varlen target uses to say what it does not support.

A library that implements part of the varlen contract (no paged cache, no ALiBi, no LSE) is
judged on the part it implements: a case whose call uses a declared word is set aside, never
sent and never scored, and a detector left with no case is ``unsupported``, not passed. Each
word is read from the values a call reaches (:func:`detectors.kit.varlen.call_values`, the
coverage model's axes), never from how a case was built, so a derived case is judged by what it
sends. ``lse`` and ``autograd`` are not values of a call: a call asking for the LSE is sent
without it and its output still judged; a detector that needs gradients is unsupported.
"""

VOCABULARY = {
    "paged": "a paged KV cache (block_table with seqused_k)",
    "seqused_k": "seqused_k on packed keys (keys allocated past those a sequence uses)",
    "sq_ne_sk": "a sequence whose query and key counts differ (decode, chunked prefill, a "
                "sequence with queries and no key)",
    "causal": "causal=True",
    "window": "a sliding window (window_size other than (-1, -1))",
    "window_right": "a window bounded on the right (window_size[1] >= 0)",
    "softcap": "softcap > 0",
    "alibi": "ALiBi slopes",
    "alibi_per_batch": "ALiBi slopes per batch row, (B, Hq)",
    "gqa": "fewer key/value heads than query heads (GQA, MQA)",
    "dv_ne_d": "a value head size Dv different from D",
    "float64": "float64 inputs",
    "strided": "q, k or v as strided views or at a storage offset (each call is sent dense "
               "copies instead, the values the same)",
    "lse": "return_lse=True: the call is made without it and only the output is judged",
    "autograd": "gradients through torch autograd",
}

# word -> the (axis, value) pairs of reference.space.VARLEN a call that uses it reaches
USES = {
    "paged": lambda values: any(a == "paging" and v != "packed" for a, v in values),
    "seqused_k": lambda values: ("seqused_k", "below allocated") in values
    and ("paging", "packed") in values,
    "sq_ne_sk": lambda values: any(a == "lengths" and v != "sq=sk" for a, v in values),
    "causal": lambda values: ("causal", "on") in values,
    "window": lambda values: any(a == "window" and v != "none" for a, v in values),
    "window_right": lambda values: bool({("window", "right"), ("window", "both")} & values),
    "softcap": lambda values: any(a == "softcap" and v != "0" for a, v in values),
    "alibi": lambda values: any(a == "alibi" and v != "none" for a, v in values),
    "alibi_per_batch": lambda values: ("alibi", "per batch and head") in values,
    "gqa": lambda values: any(a == "gqa" and v != "off" for a, v in values),
    "dv_ne_d": lambda values: ("head sizes", "Dv!=D") in values,
    "float64": lambda values: ("dtype", "float64") in values,
    "strided": lambda values: any(a == "layout" and v != "contiguous" for a, v in values),
}
NOT_OF_A_CALL = ("lse", "autograd")


def parse(words):
    """``"paged,alibi"`` or a sequence of words, as a tuple in the vocabulary's order;
    ValueError naming the unknown word and the vocabulary."""
    if isinstance(words, str):
        words = words.split(",")
    names = {w.strip() for w in words if w and w.strip()}
    unknown = sorted(names - set(VOCABULARY))
    if unknown:
        raise ValueError(f"unknown varlen capability {unknown[0]!r}: use one of "
                         f"{', '.join(VOCABULARY)}")
    return tuple(w for w in VOCABULARY if w in names)


def blocking(declared, values):
    """The declared words a call reaching ``values`` uses, in the vocabulary's order."""
    return [w for w in declared if w in USES and USES[w](values)]
