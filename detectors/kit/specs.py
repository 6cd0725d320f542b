"""The case battery's specs, and its quick tier (the deeper tiers are in
:mod:`detectors.kit.sweep`).

Within a spec every size other than 1 differs from every other (B, H query heads, L, S, E, Ev
of an attention spec; B, T, d_model, d_k, d_v of a self-attention one), so a swapped axis
either crashes or shows — except L = S in the four square causal specs (batch-causal,
heads-causal, causal-square, gqa-causal), whose causal mask is square. Sizes of 1 are the point
of a few specs (a batch of one, a single head, a single key or query), where ``squeeze`` and
friends go wrong. Some specs pass their arrays as non-contiguous views, which ``.view`` and
friends trip over (the deeper tiers add slices at a storage offset and stride-0 expansions).
Values lie on a grid of 1/8: exact in every float format, short to print in a reproduction, and
still irregular enough that no two rows agree by accident.
"""

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    """One kind of call: shapes, the mask it carries, and the arguments it uses."""

    name: str
    q: tuple  # (..., L, E)
    k: tuple  # (..., S, E)
    v: tuple  # (..., S, Ev)
    mask: str | None = None  # how the bool mask is drawn: see _mask
    mask_shape: tuple | None = None
    bias: str | None = None  # how the float (additive) mask is drawn
    causal: bool = False  # SDPA is_causal
    scale: float | None = None  # SDPA scale
    gqa: bool = False  # SDPA enable_gqa
    logits: float = 1.0  # multiplies Q: large or tiny scores
    key_logits: float = 1.0  # multiplies K: with ``logits``, raw Q·Kᵀ past float16's 65504
    head_logits: tuple = ()  # multiplies Q per head (axis -3): sharp heads beside flat ones
    layout: str = "contiguous"  # how the arrays lie in memory (detectors.kit.memory.LAYOUTS)
    # K, V and the mask the same along every leading axis (batch, heads): one prefix cache
    # shared by a batch, one key/value head for all, a mask built (1, 1, L, S) and expanded,
    # what the "expanded" layout sends with stride 0
    shared: bool = False
    unbatched: bool = False  # SDPA is sent fewer than (N, H, L, E) axes, as torch accepts
    pads: tuple | None = None  # masked prefixes of a "left-padding" mask (LEFT_PADS if None)
    tags: tuple = ()

    @functools.cached_property  # asked of every request; a frozen spec's answer never changes
    def contracts(self):
        lesson = self.bias is None and not self.causal and self.scale is None and not self.gqa
        same_lead = self.q[:-2] == self.k[:-2] == self.v[:-2]
        heads_ok = same_lead or (self.gqa and self.q[:-3] == self.k[:-3])
        sdpa = (len(self.q) >= 4 or self.unbatched) and heads_ok
        return tuple(c for c, ok in (("lesson", lesson), ("sdpa", sdpa)) if ok)


@dataclass(frozen=True)
class SelfSpec:
    """A causal self-attention call: X (..., T, d_model) and three projections."""

    name: str
    x: tuple
    d_k: int
    d_v: int
    logits: float = 1.0
    tags: tuple = ()


ATTENTION = (
    Spec("one-head", q=(4, 5), k=(6, 5), v=(6, 3)),
    Spec("one-head-mask", q=(5, 3), k=(4, 3), v=(4, 6), mask="random", mask_shape=(5, 4)),
    Spec("one-key", q=(2, 3, 4), k=(2, 1, 4), v=(2, 1, 5)),
    Spec("decode", q=(2, 1, 4), k=(2, 7, 4), v=(2, 7, 3), tags=("decode",)),
    Spec("batch", q=(2, 4, 3), k=(2, 5, 3), v=(2, 5, 6)),
    Spec("batch-shared-mask", q=(3, 5, 4), k=(3, 6, 4), v=(3, 6, 2), mask="random",
         mask_shape=(5, 6), layout="transposed"),
    Spec("batch-of-one", q=(1, 3, 5), k=(1, 4, 5), v=(1, 4, 2), mask="random",
         mask_shape=(1, 3, 4)),
    Spec("batch-key-padding", q=(2, 3, 5), k=(2, 7, 5), v=(2, 7, 4), mask="key-padding",
         mask_shape=(2, 1, 7)),
    Spec("batch-per-example-mask", q=(3, 4, 2), k=(3, 5, 2), v=(3, 5, 6), mask="random",
         mask_shape=(3, 4, 5)),
    Spec("batch-causal", q=(2, 5, 3), k=(2, 5, 3), v=(2, 5, 4), mask="causal",
         mask_shape=(5, 5), tags=("causal",)),
    Spec("broadcast-kv", q=(2, 4, 3), k=(5, 3), v=(5, 6)),
    Spec("batch-empty-rows", q=(2, 4, 3), k=(2, 5, 3), v=(2, 5, 6), mask="empty-rows",
         mask_shape=(2, 4, 5), tags=("empty",)),
    Spec("batch-large-logits", q=(3, 4, 2), k=(3, 5, 2), v=(3, 5, 6), logits=16.0,
         tags=("large",)),
    Spec("batch-tiny-logits", q=(2, 3, 5), k=(2, 4, 5), v=(2, 4, 6), logits=1 / 64),
    Spec("heads", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7)),
    Spec("heads-key-padding", q=(3, 2, 5, 4), k=(3, 2, 6, 4), v=(3, 2, 6, 7),
         mask="key-padding", mask_shape=(3, 1, 1, 6)),
    Spec("heads-per-head-mask", q=(2, 4, 3, 5), k=(2, 4, 6, 5), v=(2, 4, 6, 7), mask="random",
         mask_shape=(2, 4, 3, 6), layout="transposed"),
    Spec("heads-of-one", q=(2, 1, 4, 3), k=(2, 1, 5, 3), v=(2, 1, 5, 6), mask="random",
         mask_shape=(2, 1, 4, 5)),
    Spec("heads-shared-mask", q=(2, 3, 4, 6), k=(2, 3, 5, 6), v=(2, 3, 5, 7), mask="random",
         mask_shape=(4, 5)),
    Spec("heads-causal", q=(3, 2, 4, 5), k=(3, 2, 4, 5), v=(3, 2, 4, 6), mask="causal",
         mask_shape=(4, 4), tags=("causal",)),
    Spec("heads-empty-rows", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7),
         mask="empty-rows", mask_shape=(2, 3, 4, 6), tags=("empty",)),
    Spec("heads-large-logits", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), logits=16.0,
         mask="random", mask_shape=(2, 1, 4, 6), tags=("large",)),
    Spec("heads-decode", q=(2, 3, 1, 4), k=(2, 3, 7, 4), v=(2, 3, 7, 5), tags=("decode",)),
    # SDPA arguments the lesson contract does not have
    Spec("float-mask", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), bias="additive",
         mask_shape=(4, 6)),
    Spec("float-mask-per-item", q=(3, 2, 5, 4), k=(3, 2, 6, 4), v=(3, 2, 6, 7),
         bias="additive", mask_shape=(3, 1, 5, 6)),
    Spec("float-mask-empty-row", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7),
         bias="empty-rows", mask_shape=(2, 1, 4, 6), tags=("empty",)),
    Spec("causal-square", q=(2, 3, 5, 4), k=(2, 3, 5, 4), v=(2, 3, 5, 6), causal=True,
         tags=("causal",)),
    Spec("causal-wide", q=(2, 3, 4, 5), k=(2, 3, 7, 5), v=(2, 3, 7, 6), causal=True,
         layout="transposed", tags=("causal", "rectangular")),
    Spec("causal-tall", q=(2, 3, 6, 5), k=(2, 3, 4, 5), v=(2, 3, 4, 7), causal=True,
         tags=("causal", "rectangular")),
    Spec("causal-decode", q=(2, 3, 1, 4), k=(2, 3, 6, 4), v=(2, 3, 6, 5), causal=True,
         tags=("causal", "rectangular", "decode")),
    Spec("scale", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), scale=0.375),
    Spec("scale-masked", q=(3, 2, 4, 5), k=(3, 2, 6, 5), v=(3, 2, 6, 7), scale=2.5,
         mask="random", mask_shape=(3, 2, 4, 6)),
    Spec("scale-zero", q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), scale=0.0),
    Spec("gqa", q=(2, 6, 4, 5), k=(2, 3, 7, 5), v=(2, 3, 7, 8), gqa=True, tags=("gqa",)),
    Spec("gqa-masked", q=(3, 4, 5, 2), k=(3, 1, 6, 2), v=(3, 1, 6, 7), gqa=True,
         mask="random", mask_shape=(3, 1, 5, 6), layout="transposed", tags=("gqa",)),
    Spec("gqa-rank5", q=(2, 3, 8, 5, 6), k=(2, 3, 4, 7, 6), v=(2, 3, 4, 7, 9), gqa=True,
         tags=("gqa",)),
    Spec("gqa-causal", q=(2, 6, 5, 3), k=(2, 2, 5, 3), v=(2, 2, 5, 4), gqa=True, causal=True,
         tags=("gqa", "causal")),
    Spec("rank5", q=(2, 3, 4, 5, 6), k=(2, 3, 4, 7, 6), v=(2, 3, 4, 7, 8), mask="random",
         mask_shape=(2, 1, 4, 5, 7)),
)

SELF = (
    SelfSpec("self-single", x=(5, 6), d_k=4, d_v=3),
    SelfSpec("self-batch", x=(2, 7, 5), d_k=3, d_v=4),
    SelfSpec("self-batch-large", x=(3, 6, 4), d_k=5, d_v=2, logits=12.0, tags=("large",)),
)

SOFTMAX = ((3,), (4, 5), (2, 3, 6))
