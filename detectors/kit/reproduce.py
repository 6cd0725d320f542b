"""Reproductions that stay short at scale: every input is rebuilt the way it was made.

A battery array is redrawn from its seeded stream (``np.random.default_rng([seed, r, i])``, the
same draws in the same order), as is an array a detector drew with ``battery.grid`` from its
own seeded generator; an array derived from another (a copy with a few entries or rows
changed, a permutation or prefix along one axis, a negation, a float mask from a bool one, a
shift broadcast along axes, a constant, V = I) is written as that derivation, the shortest
that works. Every line is run here before it is printed and its value compared with the
array it stands for, so a reproduction never shows a recipe that gives other numbers; what no
recipe gives is printed as literal numbers, as is any array whose literal is as short.
"""

import copy
import weakref
from collections import OrderedDict

import numpy as np

SMALL = 32  # a shift or a row pattern of at most this many numbers is printed
MAX_EDITS = 48  # a copy with more changed entries than this is not "a few edits"
MAX_EDIT_LINES = 6  # nor is one that takes more lines of slices and rows than this
MAX_BASES = 12  # battery arrays tried as the base of a derived one
TRACED = 64  # generators whose grid draws are followed, most recent first

_drawn = {}  # id(array) -> (weak reference, stream key, index of its draw in the stream)
_streams = {}  # stream key -> source lines of each draw, in order ({x}: the name, {rng})
_seeds = {}  # stream key -> the seed the snippet passes to default_rng (the key itself if absent)
_large = {}  # stream key -> whether any of its draws is too large to print
_traced = OrderedDict()  # id(generator) -> (the generator, its stream key)


def remember(stream, draws, seed=None):
    """Record arrays drawn in order from ``default_rng(seed or stream)``: ``draws`` is a list
    of (array or None, lines) where the lines make the array from ``{rng}`` into ``{x}``."""
    key = tuple(stream)
    _streams[key] = tuple(lines for _, lines in draws)
    _large[key] = any(isinstance(a, np.ndarray) and a.size > SMALL for a, _ in draws)
    if seed is not None:
        _seeds[key] = seed
    for i, (a, _) in enumerate(draws):
        if isinstance(a, np.ndarray):
            _drawn[id(a)] = (weakref.ref(a), key, i)
            weakref.finalize(a, _drawn.pop, id(a), None)


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
            for table in (_streams, _seeds, _large):
                table.pop(old, None)
    _traced.move_to_end(id(rng))
    key = _traced[id(rng)][1]
    entropy = seq.entropy
    seed = list(entropy) if isinstance(entropy, (list, tuple)) else int(entropy)
    earlier = [(None, lines) for lines in _streams.get(key, ())]
    remember(key, earlier + [(a, lines)], seed)


def grid_draw(shape, scale=1.0):
    """The lines of ``battery.grid``: normal draws on the 1/8 grid, times a scale."""
    times = "" if scale == 1.0 else f" * {float(scale)!r}"
    return (f"{{x}} = np.round({{rng}}.standard_normal({tuple(shape)}) * 8) / 8{times}",)


def _same(a, b):
    return (isinstance(b, np.ndarray) and a.shape == b.shape
            and (a.dtype == bool) == (b.dtype == bool)
            and np.array_equal(a, b, equal_nan=a.dtype != bool))


def _number(x):
    x = float(x)
    if np.isfinite(x):
        return repr(x)
    return "np.nan" if np.isnan(x) else f"{'-' if x < 0 else ''}np.inf"


def _value(x, boolean):
    return repr(bool(x)) if boolean else _number(x)


def literal(a):
    """``np.array([...])``: float64 or bool, as the request holds it."""
    body = np.array2string(a, separator=", ", threshold=10**6, max_line_width=10**6,
                           formatter=None if a.dtype == bool else {"float_kind": _number})
    return f"np.array({body})" if a.dtype == bool else f"np.array({body}, dtype=np.float64)"


def _short(a):
    """A literal for an array of a few numbers: a scalar when they are all one value."""
    first = a.ravel()[0]
    if _same(a, np.full(a.shape, first)):
        return _value(first, a.dtype == bool)
    return literal(a)


def _cost(lines):
    """How much reading the lines take: their number plus their length in 80-column lines."""
    return sum(line.count("\n") + 1 + len(line) / 80 for line in lines)


def _span(ix):
    """``a:b`` for a contiguous run of indices (``a`` for one), else None."""
    ix = list(ix)
    if ix == list(range(ix[0], ix[-1] + 1)):
        return f"{ix[0]}:{ix[-1] + 1}" if len(ix) > 1 else str(ix[0])
    return None


class Builder:
    """Lines that rebuild a snippet's arrays, each run and checked as it is added."""

    def __init__(self):
        self.lines, self.names = [], {}  # names: id(array) -> variable
        self.scope = {"np": np}
        self.rngs = {}  # stream key -> (rng variable, draws made)

    def name(self, a, role):
        """The variable holding ``a``, adding the lines that build it on first use."""
        if id(a) in self.names:
            return self.names[id(a)]
        for var, value in self._built():  # an equal array made earlier
            if _same(a, value):
                self.names[id(a)] = var
                return var
        var = f"{role}{len(self.names) + 1}"
        printed = [f"{var} = {literal(a)}"]
        best = self._best(a, var)
        if best is None or _cost(best[0]) > _cost(printed):
            best = self._run(a, var, printed, self._trial(), dict(self.rngs))
        self.lines += best[0]
        self.scope, self.rngs = best[1], best[2]
        self.names[id(a)] = var
        return var

    def _built(self):
        return [(var, value) for var, value in self.scope.items()
                if isinstance(value, np.ndarray) and var[0] != "_"]

    def _trial(self, scope=None):
        """A copy of the scope whose generators can draw without advancing the real ones."""
        return {k: copy.deepcopy(v) if isinstance(v, np.random.Generator) else v
                for k, v in (scope or self.scope).items()}

    @staticmethod
    def _run(a, var, lines, scope, rngs):
        """(lines, scope, rngs) when the lines, with a few edits if need be, give ``a``."""
        try:
            for line in lines:
                exec(line, scope)  # noqa: S102 - lines written here, from numbers and shapes
            if not _same(a, scope.get(var)):
                edits = _edits(a, scope.get(var), var)
                if edits is None:
                    return None
                for line in edits:
                    exec(line, scope)  # noqa: S102
                lines = lines + edits
        except Exception:  # noqa: BLE001 - a recipe that does not run is simply not used
            return None
        return (lines, scope, rngs) if _same(a, scope.get(var)) else None

    def _best(self, a, var):
        """The shortest recipe that gives ``a``, trying the cheap kinds first: its seeded
        draw, a constant or V = I; then derivations from arrays built so far; then from
        battery arrays of a related shape, drawn for it."""
        found = []
        entry = _drawn.get(id(a))
        if entry and entry[0]() is a and entry[1] in _streams:
            found.append(self._redraw(a, var, entry[1], entry[2], [], self.scope, self.rngs))
        shaped = _constant(a, var)
        if shaped:
            found.append(self._run(a, var, shaped, self._trial(), dict(self.rngs)))
        for bases in (self._built_bases(a), self._drawn_bases(a)):
            if any(found):
                break
            for base_var, base, lines, scope, rngs in bases:  # lines: already run in scope
                for recipe in _derivations(a, var, base_var, base):
                    made = self._run(a, var, recipe, self._trial(scope), dict(rngs))
                    if made is not None:
                        found.append((lines + made[0],) + made[1:])
        found = [f for f in found if f is not None]
        return min(found, key=lambda f: _cost(f[0]), default=None)

    def _redraw(self, a, var, key, index, lines, scope, rngs):
        scope, rngs, lines = self._trial(scope), dict(rngs), list(lines)
        rng, made = rngs.get(key, (None, 0))
        if rng is None or made > index:  # a fresh generator for the stream
            rng, made = f"rng{sum(k.startswith('rng') for k in scope) + 1}", 0
            lines.append(f"{rng} = np.random.default_rng({_seeds.get(key, list(key))})")
        for i in range(made, index + 1):
            lines += [s.format(x=var if i == index else "_", rng=rng) for s in _streams[key][i]]
        rngs[key] = (rng, index + 1)
        return self._run(a, var, lines, scope, rngs)

    def _built_bases(self, a):
        """(variable, array, lines, scope, rngs) for the arrays built so far ``a`` may derive
        from (no lines needed)."""
        return [(var, value, [], self.scope, self.rngs) for var, value in self._built()
                if _related(a, value)]

    def _drawn_bases(self, a):
        """The same for battery arrays of a related shape, with the lines that draw them."""
        tried = 0
        for ref, key, index in list(_drawn.values()):
            base = ref()
            if base is None or key not in _streams or id(base) in self.names \
                    or not _related(a, base):
                continue
            tried += 1
            if tried > MAX_BASES:
                return
            var = f"base{sum(k.startswith('base') for k in self.scope) + 1}"
            drawn = self._redraw(base, var, key, index, [], self.scope, self.rngs)
            if drawn is not None:
                yield (var, base) + drawn


def _related(a, b):
    """Same shape, or the same kind and shape but for one axis: what a derivation bridges."""
    if a.ndim != b.ndim or not a.size:
        return False
    if (a.dtype == bool) != (b.dtype == bool):
        return a.shape == b.shape and b.dtype == bool  # a float mask made from a bool one
    return sum(x != y for x, y in zip(a.shape, b.shape)) <= 1


def _constant(a, var):
    """One value everywhere, or V = I broadcast over the leading axes; else None."""
    first = a.ravel()[0]
    if _same(a, np.full(a.shape, first)):
        return [f"{var} = np.full({a.shape}, {_value(first, a.dtype == bool)})"]
    S = a.shape[-1]
    if a.ndim >= 2 and a.shape[-2] == S and _same(a, np.broadcast_to(np.eye(S), a.shape)):
        return [f"{var} = np.broadcast_to(np.eye({S}), {a.shape}).copy()"]
    return None


def _derivations(a, var, base_var, base):
    """Candidate lines making ``a`` from ``base`` (each then checked, with edits allowed)."""
    if base.dtype == bool and a.dtype != bool:
        kept, dropped = a[base], a[~base]
        if kept.size and dropped.size:
            yield [f"{var} = np.where({base_var}, {_number(kept[0])}, {_number(dropped[0])})"]
        return
    if a.shape == base.shape:
        yield [f"{var} = {base_var}.copy()"]
        if a.dtype == bool:
            yield [f"{var} = ~{base_var}"]
        else:
            with np.errstate(all="ignore"):
                delta, ratio = a - base, a / base
            if np.all(np.isfinite(delta)) and delta.any():
                small = _reduced(delta)
                if small.size <= SMALL:
                    yield [f"{var} = {base_var} + {_short(small)}"]
            c = ratio[np.isfinite(ratio)].ravel()[:1]
            if c.size and c[0] != 1:
                yield [f"{var} = {base_var} * {_number(c[0])}"]
    for axis in range(a.ndim):
        if all(x == y for i, (x, y) in enumerate(zip(a.shape, base.shape)) if i != axis):
            order = _taken(a, base, axis)
            if order is not None and order != list(range(base.shape[axis])):
                yield [_take(var, base_var, order, axis - a.ndim, a.ndim)]


def _take(var, base_var, order, at, ndim):
    span = _span(order)
    if span and ":" in span:
        lead = "..., " if at != -ndim else ""
        return f"{var} = {base_var}[{lead}{span}{', :' * (-at - 1)}].copy()"
    return f"{var} = np.take({base_var}, {order}, axis={at})"


def _reduced(delta):
    """``delta`` with every axis along which it is constant reduced to length 1."""
    for axis in range(delta.ndim):
        first = np.take(delta, [0], axis=axis)
        if np.array_equal(delta, np.broadcast_to(first, delta.shape)):
            delta = first
    return delta


def _taken(a, base, axis):
    """Indices ``i`` with ``a == np.take(base, i, axis)``, or None."""
    slices = {np.take(base, [j], axis=axis).tobytes(): j
              for j in range(base.shape[axis] - 1, -1, -1)}
    order = [slices.get(np.take(a, [i], axis=axis).tobytes()) for i in range(a.shape[axis])]
    return None if any(o is None for o in order) else order


def _edits(a, made, var):
    """Lines that turn ``made`` into ``a`` when they differ in a block (set or shifted), in
    whole slices or rows of one value, and in a few entries besides; else None."""
    if not isinstance(made, np.ndarray) or made.shape != a.shape:
        return None
    idx = _differ(a, made)
    if not len(idx[0]):
        return []
    box = tuple(sorted(set(i.tolist())) for i in idx)
    spans = [_span(ix) for ix in box]
    if all(spans):  # the block that holds every change: its values, or one shift
        at = tuple(slice(ix[0], ix[-1] + 1) for ix in box)
        small = _reduced(a[at])
        if small.size <= SMALL:
            return [f"{var}[{', '.join(spans)}] = {_short(small)}"]
        if a.dtype != bool:
            with np.errstate(all="ignore"):
                shift = _reduced(a[at] - made[at])
            if shift.size == 1 and np.isfinite(shift).all() \
                    and np.array_equal(made[at] + shift.ravel()[0], a[at]):
                return [f"{var}[{', '.join(spans)}] += {_number(shift.ravel()[0])}"]
    made, lines = made.copy(), []
    for axis in range(a.ndim):  # whole slices of one value (a column of a mask, a key)
        for j in sorted(set(idx[axis].tolist())):
            want = np.take(a, j, axis=axis)
            if want.size > 1 and _same(want, np.full(want.shape, want.ravel()[0])):
                at = (slice(None),) * axis + (j,)
                made[at] = want
                lines.append(f"{var}[{', '.join([':'] * axis + [str(j)])}] = "
                             f"{_value(want.ravel()[0], a.dtype == bool)}")
    idx = _differ(a, made)
    if a.ndim > 1 and len(idx[0]):  # whole rows set to one pattern, a line per pattern
        rows = sorted(set(zip(*(i.tolist() for i in idx[:-1]))))
        groups = {}
        for row in rows:
            groups.setdefault(a[row].tobytes(), []).append(row)
        for group in groups.values():
            pattern = a[group[0]]
            if len(group) > 1 or _same(pattern, np.full(pattern.shape, pattern[0])):
                lead = tuple(list(ix) for ix in zip(*group))
                made[lead] = pattern
                lines.append(f"{var}[{', '.join(str(ix) for ix in lead)}] = {_short(pattern)}")
        idx = _differ(a, made)
    if len(idx[0]) > MAX_EDITS or len(lines) > MAX_EDIT_LINES:
        return None
    if len(idx[0]):
        lines.append(f"{var}[{', '.join(str(i.tolist()) for i in idx)}] = {_short(a[idx])}")
    return lines


def _differ(a, made):
    """The indices where ``made`` is not ``a`` (NaN equal to NaN)."""
    differ = made != a
    if a.dtype != bool:
        differ &= ~(np.isnan(made) & np.isnan(a))
    return np.nonzero(differ)
