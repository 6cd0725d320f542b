"""Where each battery array came from, so that a reproduction can redraw it instead of
printing its numbers: the seeded stream and draw it came from (``remember``, ``trace``) and the
products of X and W it is (``projection``). ``detectors.kit.reproduce`` reads these tables.
"""

import weakref
from collections import OrderedDict

import numpy as np

TRACED = 64  # generators whose grid draws are followed, most recent first

DRAWN = {}  # id(array) -> (weak reference, stream key, index of its draw in the stream)
STREAMS = {}  # stream key -> source lines of each draw, in order ({x}: the name, {rng})
SEEDS = {}  # stream key -> the seed the snippet passes to default_rng (the key itself if absent)
_traced = OrderedDict()  # id(generator) -> (the generator, its stream key)
PROJECTED = {}  # id(X) -> (weak reference to X, weak references to the W it is projected by)


def remember(stream, draws, seed=None):
    """Record arrays drawn in order from ``default_rng(seed or stream)``: ``draws`` is a list
    of (array or None, lines) where the lines make the array from ``{rng}`` into ``{x}``."""
    key = tuple(stream)
    STREAMS[key] = tuple(lines for _, lines in draws)
    if seed is not None:
        SEEDS[key] = seed
    for i, (a, _) in enumerate(draws):
        if isinstance(a, np.ndarray):
            DRAWN[id(a)] = (weakref.ref(a), key, i)
            weakref.finalize(a, DRAWN.pop, id(a), None)


def projection(x, weights):
    """Record that ``x @ w`` for each of ``weights`` is an array a request may carry (a
    self-attention call's Q, K and V, SDPA's with a head axis): a reproduction writes such an
    array, or a slice of it, as that product of X and W rather than as its numbers."""
    entry = PROJECTED.get(id(x))
    if entry is not None and entry[0]() is x:
        return
    PROJECTED[id(x)] = (weakref.ref(x), tuple(weakref.ref(w) for w in weights))
    weakref.finalize(x, PROJECTED.pop, id(x), None)


def trace(rng, a, lines):
    """Record that ``a`` was drawn from generator ``rng`` by ``lines``, after its earlier traced
    draws: right when every draw from a freshly seeded generator is traced (the lines are
    checked when a reproduction uses them, so an untraced draw in between only costs a
    literal)."""
    seq = getattr(rng.bit_generator, "seed_seq", None)
    if seq is None or seq.spawn_key or seq.entropy is None:
        return
    if id(rng) not in _traced:
        _traced[id(rng)] = (rng, ("traced", id(rng), len(_traced)))
        while len(_traced) > TRACED:  # forget the oldest generator's draws
            _, (_, old) = _traced.popitem(last=False)
            for table in (STREAMS, SEEDS):
                table.pop(old, None)
    _traced.move_to_end(id(rng))
    key = _traced[id(rng)][1]
    entropy = seq.entropy
    seed = list(entropy) if isinstance(entropy, (list, tuple)) else int(entropy)
    earlier = [(None, lines) for lines in STREAMS.get(key, ())]
    remember(key, earlier + [(a, lines)], seed)


def grid_draw(shape, scale=1.0):
    """The lines of ``draw.grid``: normal draws on the 1/8 grid, times a scale."""
    times = "" if scale == 1.0 else f" * {float(scale)!r}"
    return (f"{{x}} = np.round({{rng}}.standard_normal({tuple(shape)}) * 8) / 8{times}",)
