"""The deeper tiers of the battery: where tiled, chunked and split-KV kernels break.

``quick`` is :data:`detectors.kit.specs.ATTENTION` (small enough to print). ``standard`` adds
a few realistic cases per feature: a key axis past one and two tiles of 64 and 128, queries
crossing a chunk boundary, a masked prefix of whole tiles, head dims past 128, groups of 8
query heads, a (H, L, S) mask under 4-D queries, a 513-key decode cache, unbatched 2-D and 3-D
calls, float16 magnitudes (raw |q·k| past 65504, scaled scores moderate), heads of
different sharpness in one call, inputs sliced at a storage offset, and keys, values and a mask
shared by the batch and sent expanded with stride 0. ``deep`` is a pairwise covering array over
the values of ``reference.space``'s axes, in the spirit of FlashAttention's and PyTorch's own
SDPA tests: every pair of values of any two axes meets in some case, each case draws its
concrete sizes from a fixed seed (the same cases for every battery seed), and no case exceeds
:data:`MAX_SCORES` scores.
"""

import functools
import math

import numpy as np

from detectors.kit.memory import LAYOUTS  # an "expanded" case shares K, V and its mask
from detectors.kit.specs import SelfSpec, Spec

HALF = 64.0  # q and k entries ~ N(0, 64²): raw q·k past float16's largest finite 65504


# Per-head factors on Q: scores of about ±4·3 in the first head, ±0.25·3 in the second, as a
# sharp head sits beside a diffuse one in trained models; a row of the diffuse head lies ~12
# below the sharpest score of the call.
SHARPNESS = (4.0, 0.25, 1.0, 0.5)


def _half_scale(E):
    """A power-of-two scale that brings HALF² · √E-sized raw scores back to about 1."""
    return 2.0 ** -round(math.log2(HALF * HALF * math.sqrt(E)))


STANDARD = (
    Spec("tiles-past-one", q=(2, 3, 70, 32), k=(2, 3, 129, 32), v=(2, 3, 129, 24),
         layout="transposed", tags=("tiles",)),
    Spec("tiles-equal-dims", q=(1, 2, 65, 64), k=(1, 2, 257, 64), v=(1, 2, 257, 64),
         mask="random", mask_shape=(1, 2, 65, 257), tags=("tiles",)),
    Spec("chunks-causal", q=(1, 2, 130, 16), k=(1, 2, 130, 16), v=(1, 2, 130, 16), causal=True,
         tags=("causal", "chunks")),
    Spec("chunks-causal-tall", q=(2, 1, 129, 8), k=(2, 1, 17, 8), v=(2, 1, 17, 12),
         causal=True, tags=("causal", "rectangular", "chunks")),
    Spec("left-padding-tiles", q=(3, 2, 9, 16), k=(3, 2, 200, 16), v=(3, 2, 200, 8),
         mask="left-padding", mask_shape=(3, 1, 1, 200), tags=("tiles", "padding")),
    Spec("empty-rows-long", q=(2, 2, 20, 16), k=(2, 2, 150, 16), v=(2, 2, 150, 16),
         mask="empty-rows", mask_shape=(2, 2, 20, 150), tags=("empty", "tiles")),
    Spec("wide-heads", q=(1, 2, 33, 160), k=(1, 2, 40, 160), v=(1, 2, 40, 96),
         tags=("wide",)),
    Spec("wide-heads-equal", q=(2, 1, 17, 256), k=(2, 1, 65, 256), v=(2, 1, 65, 256),
         tags=("wide",)),
    Spec("gqa-groups-of-8", q=(2, 16, 12, 32), k=(2, 2, 70, 32), v=(2, 2, 70, 32), gqa=True,
         tags=("gqa",)),
    Spec("gqa-groups-of-6-causal", q=(1, 6, 40, 16), k=(1, 1, 40, 16), v=(1, 1, 40, 24),
         gqa=True, causal=True, tags=("gqa", "causal")),
    Spec("mask-per-head-3d", q=(3, 4, 17, 16), k=(3, 4, 24, 16), v=(3, 4, 24, 8),
         mask="random", mask_shape=(4, 17, 24), tags=("mask-rank",)),
    Spec("mask-key-row", q=(5, 9, 16), k=(5, 66, 16), v=(5, 66, 16), mask="random",
         mask_shape=(1, 66), unbatched=True, tags=("mask-rank", "unbatched")),
    Spec("decode-long-cache", q=(2, 4, 1, 64), k=(2, 4, 513, 64), v=(2, 4, 513, 64),
         tags=("decode", "tiles")),
    Spec("unbatched-2d", q=(65, 24), k=(130, 24), v=(130, 20), unbatched=True,
         tags=("unbatched", "tiles")),
    Spec("unbatched-3d-causal", q=(3, 70, 16), k=(3, 70, 16), v=(3, 70, 16), causal=True,
         unbatched=True, tags=("unbatched", "causal", "chunks")),
    Spec("half-magnitudes", q=(2, 2, 40, 64), k=(2, 2, 48, 64), v=(2, 2, 48, 64),
         logits=HALF, key_logits=HALF, scale=_half_scale(64), tags=("magnitude",)),
    Spec("heads-of-different-sharpness", q=(2, 4, 24, 64), k=(2, 4, 80, 64), v=(2, 4, 80, 32),
         head_logits=SHARPNESS, tags=("sharpness",)),
    # head sizes of the input space (reference/space.py) no other case has: one feature, and
    # both sides of a power of two, where vectorised loads and tiles of 32 go wrong
    Spec("head-dim-one", q=(2, 3, 7, 1), k=(2, 3, 11, 1), v=(2, 3, 11, 1)),
    Spec("head-dim-past-32", q=(1, 2, 19, 33), k=(1, 2, 29, 33), v=(1, 2, 29, 33)),
    Spec("head-dim-short-of-32", q=(2, 1, 13, 31), k=(2, 1, 23, 31), v=(2, 1, 23, 17)),
    # positions past bfloat16's last exact integer (256), where positions computed in the
    # inputs' format round together
    Spec("causal-past-256", q=(1, 2, 300, 16), k=(1, 2, 300, 16), v=(1, 2, 300, 8), causal=True,
         tags=("causal",)),
    # memory layouts beside the quick tier's transposed views: every argument a slice [..., 1:]
    # of a wider buffer (as q, k and v cut from one packed projection start at an offset), and
    # one key/value prefix with an HF-style mask built (1, 1, L, S), expanded to the batch
    Spec("inputs-at-an-offset", q=(2, 3, 11, 16), k=(2, 3, 37, 16), v=(2, 3, 37, 8),
         mask="random", mask_shape=(2, 1, 11, 37), layout="offset"),
    Spec("shared-prefix-expanded", q=(3, 2, 9, 16), k=(3, 2, 41, 16), v=(3, 2, 41, 12),
         mask="random", mask_shape=(3, 2, 9, 41), layout="expanded", shared=True),
)
STANDARD_SELF = (SelfSpec("self-long", x=(2, 70, 16), d_k=16, d_v=8, tags=("chunks",)),)
STANDARD_SOFTMAX = ((3, 257),)

# -- the deep sweep ---------------------------------------------------------------------------
# Factors of the covering array: the values of reference.space's axes, each with the concrete
# sizes a case of that value draws from (a case's own seed picks one). Every pair of values of
# any two factors appears in at least one case (covertable, strength 2); the same cases for every
# battery seed.

SWEEP_SEED = 20_241  # the concrete sizes drawn for each case of the covering array
MAX_SCORES = 1 << 20  # lead · L · S of one case: cost stays linear in what the case asks
LENGTHS = {  # reference.space.SIZES, where tiled, chunked and split-KV kernels break
    "1": (1,), "prime": (17, 31, 61, 127, 257), "2^k": (16, 64, 128, 256, 512, 1024),
    "2^k+1": (17, 65, 129, 257, 513), "2^k-1": (15, 63, 127, 255, 511, 1023),
    ">64": (70, 100, 200, 300, 700)}
HEAD_DIMS = {  # the E axis, and the widths deployed models use beside the powers of two
    "1": (1,), "prime": (7, 59, 61), "2^k": (8, 16, 32, 64, 128), "2^k+1": (17, 33, 65),
    "2^k-1": (15, 31, 63, 127), "deployed": (80, 96, 112), ">128": (160, 192, 256)}
VALUE_DIMS = ("=E", "!=E")
LEADS = ("2-D", "3-D", "4-D one item", "4-D items", "5-D")  # the query's leading axes
GROUPS = {"off": (1,), "g=2": (2,), "g>=4": (3, 4, 6, 8, 16), "mqa": (4, 8)}
MASKS = ("none", "row", "matrix", "per-head", "per-item", "key-padding", "left-padding",
         "empty-rows", "causal", "bias")
SCORES = {  # (Q's factor, K's factor): scores of order 1, peaked, flat, raw q·k past 65504
    "ordinary": (1.0, 1.0), "peaked": (4.0, 1.0), "flat": (1 / 64, 1.0), "past float16": (HALF, HALF)}
FACTORS = {"L": tuple(LENGTHS), "S": tuple(LENGTHS), "E": tuple(HEAD_DIMS), "Ev": VALUE_DIMS,
           "lead": LEADS, "gqa": tuple(GROUPS), "mask": MASKS, "scores": tuple(SCORES),
           "layout": LAYOUTS}
# grouped heads need a heads axis; a key-padding mask needs a batch axis; an expansion needs a
# leading axis to share along
CONSTRAINTS = (
    {"operator": "or", "conditions": [{"operator": "eq", "left": "gqa", "value": "off"},
                                       {"operator": "in", "left": "lead",
                                        "values": ["4-D one item", "4-D items", "5-D"]}]},
    {"operator": "or", "conditions": [{"operator": "ne", "left": "lead", "value": "2-D"},
                                       {"operator": "not", "condition": {
                                           "operator": "in", "left": "mask",
                                           "values": ["key-padding", "left-padding"]}}]},
    {"operator": "or", "conditions": [{"operator": "ne", "left": "lead", "value": "2-D"},
                                       {"operator": "ne", "left": "layout", "value": "expanded"}]},
)


@functools.lru_cache(maxsize=1)
def covering():
    """The pairwise covering array over :data:`FACTORS`: a list of {factor: value}."""
    from covertable import make  # only when a deep battery is built

    return make(FACTORS, strength=2, constraints=list(CONSTRAINTS), salt="attnzoo")


def _deep_case(i, L, S, E, Ev, group, lead, mask, scores, layout, batch=None):
    causal = mask == "causal"
    if causal and i % 2:
        S = L  # square causal as often as rectangular
    rank = {"2-D": 2, "3-D": 3, "5-D": 5}.get(lead, 4)
    if batch is None:
        batch = 1 if lead == "4-D one item" else 2 + i % 2
    heads = 1 if group in GROUPS["mqa"] and rank >= 4 and i % 2 else 2
    gqa = rank >= 4 and group > 1
    hq = heads * group if gqa else heads
    lead_q = {2: (), 3: (batch,), 4: (batch, hq), 5: (2, batch, hq)}[rank]
    while int(np.prod(lead_q, dtype=np.int64)) * L * S > MAX_SCORES and lead_q and lead_q[0] > 1:
        lead_q = (lead_q[0] // 2,) + lead_q[1:]  # shrink the batch, never the lengths
    while int(np.prod(lead_q, dtype=np.int64)) * L * S > MAX_SCORES:
        L = max(1, L // 2)
    lead_kv = lead_q[:-1] + (lead_q[-1] // group,) if gqa else lead_q
    m_shape, kind, bias = None, None, None
    if mask in ("row", "matrix", "per-head", "per-item", "empty-rows", "bias"):
        kind = "random" if mask != "empty-rows" else "empty-rows"
        row = (S,) if rank != 4 else (1, S)  # torch's 4-D kernels refuse a (S,) mask
        m_shape = {"row": row, "matrix": (L, S)}.get(mask, lead_q[-2:] + (L, S))
        if mask == "per-head" and rank >= 4:
            m_shape = lead_q[-1:] + (L, S)  # (H, L, S) under 4-D queries
        if mask in ("empty-rows", "bias"):
            m_shape = lead_q + (L, S)
        if mask == "empty-rows" and L < 2:  # one query: a row of its own cannot go empty alone
            kind, m_shape = "random", row
        if mask == "bias":
            kind, bias = None, "additive"
    elif mask in ("key-padding", "left-padding") and rank >= 3:
        kind, m_shape = mask, lead_q[:1] + (1,) * (rank - 2) + (S,)
    half = scores == "past float16"
    q_factor, k_factor = SCORES[scores]
    name = f"deep-{i:02d}-L{L}-S{S}-E{E}-Ev{Ev}" + (f"-g{group}" if gqa else "")
    return Spec(
        name, q=lead_q + (L, E), k=lead_kv + (S, E), v=lead_kv + (S, Ev), mask=kind,
        mask_shape=m_shape, bias=bias, causal=causal, gqa=gqa, layout=layout,
        shared=layout == "expanded",
        logits=q_factor, key_logits=k_factor, scale=_half_scale(E) if half else None,
        unbatched=rank < 4,
        tags=tuple(t for t, on in (("causal", causal), ("gqa", gqa), ("magnitude", half),
                                   ("rectangular", causal and L != S), ("decode", L == 1),
                                   ("empty", kind == "empty-rows")) if on),
    )


def _concrete(i, row):
    """Case ``i`` of the covering array with sizes drawn for its values."""
    rng = np.random.default_rng([SWEEP_SEED, i])
    pick = lambda values: values[int(rng.integers(len(values)))]  # noqa: E731
    L, S, E = pick(LENGTHS[row["L"]]), pick(LENGTHS[row["S"]]), pick(HEAD_DIMS[row["E"]])
    widths = [w for ws in HEAD_DIMS.values() for w in ws if w != E]
    Ev = E if row["Ev"] == "=E" else pick(widths)
    return _deep_case(i, L, S, E, Ev, pick(GROUPS[row["gqa"]]), row["lead"], row["mask"],
                      row["scores"], row["layout"])


@functools.lru_cache(maxsize=1)
def deep():
    """The covering array's cases, the two shapes every decoder and prefill makes, and more
    slices than a launch grid's axis holds."""
    specs = [_concrete(i, row) for i, row in enumerate(covering())]
    n = len(specs)
    specs.append(_deep_case(n, 1, 1023, 128, 128, 8, "4-D items", "key-padding", "ordinary",
                            "contiguous", batch=2))
    specs.append(_deep_case(n + 1, 1024, 17, 64, 64, 1, "4-D one item", "none", "ordinary",
                            "transposed"))
    # more (batch, head) slices than a GPU grid axis holds (65535), one token each: decode of a
    # large batch, or heads folded into the batch (deep only: a kernel of Python loops walks
    # every slice, minutes at this count)
    specs.append(Spec("slices-past-65535", q=(3, 22000, 1, 2), k=(3, 22000, 2, 2),
                      v=(3, 22000, 2, 1), tags=("many",)))  # 465 slices past it
    return tuple(specs)


DEEP_SELF = (SelfSpec("self-deep", x=(1, 257, 64), d_k=64, d_v=64),)
DEEP_SOFTMAX = ((2, 1024),)


def tier(depth):
    """(attention specs, self-attention specs, softmax shapes) that ``depth`` adds."""
    if depth == "standard":
        return STANDARD, STANDARD_SELF, STANDARD_SOFTMAX
    if depth == "deep":
        return deep(), DEEP_SELF, DEEP_SOFTMAX
    raise ValueError(f"depth {depth!r} adds no tier")
