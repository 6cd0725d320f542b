"""The case battery: declarative specs, materialised as seeded calls.

Within a spec every size other than 1 differs from every other (B, H query heads, L, S, E, Ev
of an attention spec; B, T, d_model, d_k, d_v of a self-attention one), so a swapped axis
either crashes or shows — except L = S in the four square causal specs (batch-causal,
heads-causal, causal-square, gqa-causal), whose causal mask is square. Sizes of 1 are the point
of a few specs (a batch of one, a single head, a single key or query), where ``squeeze`` and
friends go wrong. Some specs pass their arrays as non-contiguous views, which ``.view`` and
friends trip over. Values lie on a grid of 1/8: exact in every float format, short to print in
a reproduction, and still irregular enough that no two rows agree by accident.
"""

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from detectors.kit.draw import (
    bias_draw,
    draw_bias,
    draw_mask,
    head_draw,
    mask_draw,
    per_head,
    softmax_draw,
    softmax_input,
    untraced_grid,
)
from detectors.kit.reproduce import grid_draw, remember
from reference import exact, loop_oracle


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
    strided: bool = False  # arrays arrive as non-contiguous views
    unbatched: bool = False  # SDPA is sent fewer than (N, H, L, E) axes, as torch accepts
    pads: tuple | None = None  # masked prefixes of a "left-padding" mask (LEFT_PADS if None)
    tags: tuple = ()

    @property
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
         mask_shape=(5, 6), strided=True),
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
         mask_shape=(2, 4, 3, 6), strided=True),
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
         strided=True, tags=("causal", "rectangular")),
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
         mask="random", mask_shape=(3, 1, 5, 6), strided=True, tags=("gqa",)),
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
MASK_SIZES = (1, 2, 3, 6)
DEPTHS = ("quick", "standard", "deep")  # each tier is the one before it plus its own cases
# Call.expected: the plain-loop oracle up to this many multiply-adds (every quick case), the
# vectorised exact oracle beyond, which the loop oracle judges on every small case
LOOP_ORACLE_WORK = 50_000


@dataclass(eq=False)
class Call:
    """One attention call with its inputs as float64 / bool arrays (keep-convention mask)."""

    spec: Spec
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None = None
    bias: np.ndarray | None = None
    name: str = ""

    causal = property(lambda self: self.spec.causal)
    scale = property(lambda self: self.spec.scale)
    gqa = property(lambda self: self.spec.gqa)

    def size(self):
        return self.q.size + self.k.size + self.v.size

    def v_per_query_head(self):
        """V as each query head reads it: with grouped heads, head h reads V head h // g."""
        if not self.gqa:
            return self.v
        return np.repeat(self.v, self.q.shape[-3] // self.v.shape[-3], axis=-3)

    def with_(self, **arrays):
        """The same call with some arrays replaced (for metamorphic relations)."""
        return replace(self, **arrays)

    def expected(self, alignment="top-left"):
        """(out, weights) from the loop oracle."""
        return _oracle(self, alignment)


@dataclass(eq=False)
class SoftmaxCall:
    """Scores for the lesson's softmax: a few -inf entries, never a whole row."""

    x: np.ndarray
    name: str = ""

    def size(self):
        return self.x.size

    def expected(self):
        return _softmax_oracle(self)


@functools.lru_cache(maxsize=256)
def _softmax_oracle(call):
    small = call.x.size * 4 <= LOOP_ORACLE_WORK
    return (loop_oracle if small else exact).softmax(call.x)


@dataclass(eq=False)
class SelfCall:
    spec: SelfSpec
    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    name: str = ""

    def size(self):
        return self.x.size + self.w_q.size + self.w_k.size + self.w_v.size

    def projections(self):
        return self.x @ self.w_q, self.x @ self.w_k, self.x @ self.w_v

    def expected(self):
        """(out, weights) from the loop oracle under the lesson's causal mask."""
        return _self_oracle(self)


@functools.lru_cache(maxsize=1024)
def _self_oracle(call):
    q, k, v = call.projections()
    return _judge(q, k, v).attend(q, k, v, causal="top-left")


def _judge(q, k, v):
    """The loop oracle where it is cheap, the exact vectorised oracle at scale."""
    lead = max(int(np.prod(q.shape[:-2])), int(np.prod(k.shape[:-2])))  # broadcast or grouped
    work = lead * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
    return loop_oracle if work <= LOOP_ORACLE_WORK else exact


@functools.lru_cache(maxsize=4096)
def _oracle(call, alignment):
    return _judge(call.q, call.k, call.v).attend(
        call.q, call.k, call.v, mask=call.mask, bias=call.bias, scale=call.scale,
        causal=alignment if call.causal else None, gqa=call.gqa,
    )


@dataclass
class Battery:
    """All calls for one seed and depth, smallest first; ``repeat`` draws each spec again."""

    seed: int = 0
    repeat: int = 1
    depth: str = "quick"  # one of DEPTHS
    attention: list = field(default_factory=list)
    self_attention: list = field(default_factory=list)
    softmax: list = field(default_factory=list)

    def __post_init__(self):
        from detectors.kit.sweep import tier

        if self.depth not in DEPTHS:
            raise ValueError(f"unknown depth {self.depth!r}: use one of {', '.join(DEPTHS)}")
        # every tier draws from its own streams, so deeper tiers never change a quick case
        tiers = [(0, ATTENTION, SELF, SOFTMAX)]
        tiers += [(1000 * (n + 1),) + tier(d) for n, d in enumerate(DEPTHS[1:])
                  if DEPTHS.index(d) <= DEPTHS.index(self.depth)]
        for r in range(self.repeat):
            for base, attention, selfs, softmaxes in tiers:
                self._draw(r, base, attention, selfs, softmaxes)
        self.attention.sort(key=Call.size)
        self.self_attention.sort(key=SelfCall.size)

    def _draw(self, r, base, attention, selfs, softmaxes):
        for i, spec in enumerate(attention):
            self.attention.append(materialise(spec, [self.seed, r, base + i], r))
        for i, spec in enumerate(selfs):
            self.self_attention.append(materialise_self(spec, [self.seed, r, base + 100 + i], r))
        for i, shape in enumerate(softmaxes):
            stream = [self.seed, r, base + 200 + i]
            x = softmax_input(shape, np.random.default_rng(stream))
            remember(stream, [(x, softmax_draw(shape))])
            name = f"softmax-{'x'.join(map(str, shape))}" + (f"#{r}" if r else "")
            self.softmax.append(SoftmaxCall(x, name))

    def calls(self, contract, where=lambda spec: True):
        return [c for c in self.attention if contract in c.spec.contracts and where(c.spec)]


def materialise(spec, stream, rep=0):
    """The spec's call drawn from ``default_rng(stream)``; the draws are remembered, so a
    reproduction can redraw them from the stream instead of printing them."""
    drawn = isinstance(stream, np.random.Generator)  # a caller's own generator: not remembered
    rng = stream if drawn else np.random.default_rng(stream)
    q = untraced_grid(rng, spec.q, spec.logits) * per_head(spec.head_logits)
    k = untraced_grid(rng, spec.k, spec.key_logits)
    v = untraced_grid(rng, spec.v)
    mask = draw_mask(spec.mask, spec.mask_shape, rng, spec.pads) if spec.mask else None
    bias = draw_bias(spec.bias, spec.mask_shape, rng) if spec.bias else None
    draws = [(q, grid_draw(spec.q, spec.logits) + head_draw(spec.head_logits)),
             (k, grid_draw(spec.k, spec.key_logits)),
             (v, grid_draw(spec.v))]
    if spec.mask:
        draws.append((mask, mask_draw(spec.mask, spec.mask_shape, spec.pads)))
    if spec.bias:
        draws.append((bias, bias_draw(spec.mask_shape)))
    if not drawn:
        remember(stream, draws)
    name = spec.name if rep == 0 else f"{spec.name}#{rep}"
    return Call(spec, q, k, v, mask, bias, name)


def materialise_self(spec, stream, rep=0):
    rng = np.random.default_rng(stream)
    d_model = spec.x[-1]
    shapes = (spec.x, (d_model, spec.d_k), (d_model, spec.d_k), (d_model, spec.d_v))
    scales = (1.0, spec.logits, 1.0, 1.0)
    x, w_q, w_k, w_v = (untraced_grid(rng, s, c) for s, c in zip(shapes, scales))
    remember(stream, [(a, grid_draw(s, c)) for a, s, c in zip((x, w_q, w_k, w_v), shapes, scales)])
    name = spec.name if rep == 0 else f"{spec.name}#{rep}"
    return SelfCall(spec, x, w_q, w_k, w_v, name)
