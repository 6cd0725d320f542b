"""The case battery: the specs of :mod:`detectors.kit.specs` and :mod:`detectors.kit.sweep`,
materialised as seeded calls, each with the oracle that judges it.
"""

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from detectors.kit.depths import DEPTHS  # each tier is the one before it plus its own cases
from detectors.kit.draw import (
    bias_draw,
    draw_bias,
    draw_mask,
    grid,
    head_draw,
    mask_draw,
    per_head,
    shared,
    shared_draw,
    softmax_draw,
    softmax_input,
    untraced_grid,
)
from detectors.kit.provenance import grid_draw, projection, remember
from detectors.kit.specs import ATTENTION, SELF, SOFTMAX, SelfSpec, Spec
from reference import exact, loop_oracle

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


def weights_call(rng, shape, name, E=5):
    """A call whose output is its weights: Q and K drawn on the grid (head size E) from
    ``rng``, V = I, so (N, H, L, S) = ``shape`` comes back as the weights themselves (dropped,
    under dropout)."""
    N, H, L, S = shape
    q, k = grid(rng, (N, H, L, E)), grid(rng, (N, H, S, E))
    eye = np.broadcast_to(np.eye(S), (N, H, S, S)).copy()  # (N, H, S, S): V = I
    return Call(Spec(name, q.shape, k.shape, eye.shape), q, k, eye, name=name)


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
        projection(self.x, (self.w_q, self.w_k, self.w_v))  # for short reproductions
        return self.x @ self.w_q, self.x @ self.w_k, self.x @ self.w_v

    def expected(self):
        """(out, weights) from the loop oracle under the lesson's causal mask."""
        return _self_oracle(self)

    def as_attention(self):
        """This call as SDPA sees it: attention on its (N, 1, T, d) projections, is_causal."""
        q, k, v = self.projections()  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        lead = (q.shape[0] if q.ndim == 3 else 1, 1)
        q, k, v = (a.reshape(lead + a.shape[-2:]) for a in (q, k, v))
        spec = Spec(self.name, q.shape, k.shape, v.shape, causal=True)
        return Call(spec, q, k, v, name=self.name)


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
    """The oracle's answer, computed once per distinct call: a relation's derived call (a
    permutation, a prefix) made again for the next implementation has the same values, so
    its answer is looked up by them. The arrays are read-only, as they are shared."""
    key = (alignment, repr(call.scale), call.causal, call.gqa) + tuple(
        None if a is None else (a.dtype.str, a.shape, a.tobytes())
        for a in (call.q, call.k, call.v, call.mask, call.bias))
    if key not in _BY_VALUES:
        answer = _judge(call.q, call.k, call.v).attend(
            call.q, call.k, call.v, mask=call.mask, bias=call.bias, scale=call.scale,
            causal=alignment if call.causal else None, gqa=call.gqa,
        )
        for a in answer:
            a.setflags(write=False)
        if len(_BY_VALUES) >= ANSWERS_KEPT:
            return answer
        _BY_VALUES[key] = answer
    return _BY_VALUES[key]


ANSWERS_KEPT = 8192  # the oracle's answers kept by value; past that, new ones are computed
_BY_VALUES = {}


@dataclass
class Battery:
    """All calls for one seed and depth, smallest first; ``repeat`` draws each spec again.
    ``start`` leaves out the tiers shallower than it: the cases ``depth`` adds to them, drawn
    as they are in the whole battery (a budgeted check runs the quick tier first, then these)."""

    seed: int = 0
    repeat: int = 1
    depth: str = "quick"  # one of DEPTHS
    start: str = "quick"  # the shallowest tier drawn
    attention: list = field(default_factory=list)
    self_attention: list = field(default_factory=list)
    softmax: list = field(default_factory=list)

    def __post_init__(self):
        from detectors.kit.sweep import tier

        for depth in (self.depth, self.start):
            if depth not in DEPTHS:
                raise ValueError(f"unknown depth {depth!r}: use one of {', '.join(DEPTHS)}")
        # every tier draws from its own streams, so deeper tiers never change a quick case
        tiers = [(0, ATTENTION, SELF, SOFTMAX)]
        tiers += [(1000 * (n + 1),) + tier(d) for n, d in enumerate(DEPTHS[1:])
                  if DEPTHS.index(d) <= DEPTHS.index(self.depth)]
        tiers = tiers[DEPTHS.index(self.start):]
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
    if spec.shared:  # the same draws, then the first item's (and head's) repeated
        k, v, mask, bias = (shared(a) for a in (k, v, mask, bias))
    again = shared_draw if spec.shared else lambda a: ()
    draws = [(q, grid_draw(spec.q, spec.logits) + head_draw(spec.head_logits)),
             (k, grid_draw(spec.k, spec.key_logits) + again(k)),
             (v, grid_draw(spec.v) + again(v))]
    if spec.mask:
        draws.append((mask, mask_draw(spec.mask, spec.mask_shape, spec.pads) + again(mask)))
    if spec.bias:
        draws.append((bias, bias_draw(spec.mask_shape) + again(bias)))
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
