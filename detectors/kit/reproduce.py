"""Reproductions that stay short at scale: every input is rebuilt the way it was made.

A battery array is redrawn from its seeded stream (``np.random.default_rng([seed, r, i])``, the
same draws in the same order), as is an array a detector drew with ``draw.grid`` from its
own seeded generator; an array derived from another (a copy with a few entries or rows
changed, a permutation or prefix along one axis, a negation, a float mask from a bool one, a
shift broadcast along axes, a constant, V = I) is written as that derivation, the shortest
that works. Every line is run here before it is printed and its value compared with the
array it stands for, so a reproduction never shows a recipe that gives other numbers; what no
recipe gives is printed as literal numbers, as is any array whose literal is as short.
"""

import ast
import copy
import re

import numpy as np

from detectors.kit.derive import (
    constant,
    derivations,
    edits,
    literal,
    related,
    same,
)
from detectors.kit.provenance import DRAWN, PROJECTED, SEEDS, STREAMS

MAX_BASES = 12  # battery arrays tried as the base of a derived one
def _cost(lines):
    """How much reading the lines take: their number plus their length in 80-column lines."""
    return sum(line.count("\n") + 1 + len(line) / 80 for line in lines)


SHORT = 8  # an index order this long or shorter is written out where it is used
TAKE = re.compile(r"np\.take\((\w+), (\[[0-9, ]+\]), axis=(-?[0-9]+)\)")


class Builder:
    """Lines that rebuild a snippet's arrays, each run and checked as it is added.

    With ``orders``, an index order an array is taken by (a permutation, some rows), when
    longer than SHORT, is named once, readably (``perm = np.roll(np.arange(130), 1)``), and every later array tried with
    the orders named so far first, so a permutation of queries and of their mask rows is one
    name rather than two long lists."""

    def __init__(self, orders=False):
        self.lines, self.names = [], {}  # names: id(array) -> variable
        self.scope = {"np": np}
        self.rngs = {}  # stream key -> (rng variable, draws made)
        self.orders = {} if orders else None  # tuple of indices -> its variable

    def name(self, a, role):
        """The variable holding ``a``, adding the lines that build it on first use."""
        known = self._known(a)
        if known is not None:
            self.names[id(a)] = known
            return known
        var = f"{role}{len(self.names) + 1}"
        printed = [f"{var} = {literal(a)}"]
        best = self._best(a, var)
        if best is None or _cost(best[0]) > _cost(printed):
            best = self._run(a, var, printed, self._trial(), dict(self.rngs))
        if self.orders is not None:
            best = self._named_orders(a, var, best)
        self.lines += best[0]
        self.scope, self.rngs = best[1], best[2]
        self.names[id(a)] = var
        return var

    def order(self, order):
        """The variable holding an index order, adding the line that makes it on first use
        (without ``orders``, the list itself)."""
        if self.orders is None:
            return list(order)
        order = tuple(int(i) for i in order)
        if order not in self.orders:
            kind = "perm" if sorted(order) == list(range(len(order))) else "index"
            count = sum(v.startswith(kind) for v in self.orders.values())
            var = kind if not count else f"{kind}{count + 1}"
            self.orders[order] = var
            self.lines.append(f"{var} = {readable(order)}")
            self.scope[var] = np.array(order)
        return self.orders[order]

    def _named_orders(self, a, var, best):
        """``best`` with each literal order of an ``np.take`` replaced by its name, when the
        lines so written still give ``a``."""
        lines, scope, rngs = best
        if not any(TAKE.search(line) for line in lines):
            return best
        before = (list(self.lines), dict(self.orders), dict(self.scope))
        named = [TAKE.sub(lambda m: m[0] if m[2].count(",") < SHORT else
                          f"np.take({m[1]}, {self.order(ast.literal_eval(m[2]))}, axis={m[3]})",
                          line) for line in lines]
        made = self._run(a, var, named, self._trial(), dict(self.rngs))
        if made is None:
            self.lines, self.orders, self.scope = before
            return best
        return made

    def _known(self, a):
        """The variable already holding ``a``, or an array equal to it; else None."""
        if id(a) in self.names:
            return self.names[id(a)]
        return next((var for var, value in self._built() if same(a, value)), None)

    def _built(self):
        return [(var, value) for var, value in self.scope.items()
                if isinstance(value, np.ndarray) and var[0] != "_"]

    def _trial(self, scope=None):
        """A copy of the scope whose generators can draw without advancing the real ones."""
        return {k: copy.deepcopy(v) if isinstance(v, np.random.Generator) else v
                for k, v in (scope or self.scope).items()}

    @staticmethod
    def _run(a, var, lines, scope, rngs):
        """(lines, scope, rngs) when the lines, with a few edits if need be, give ``a``. A trial
        over NaN or inf entries may warn; it is judged by what it gives, silently."""
        try:
            with np.errstate(all="ignore"):
                for line in lines:
                    exec(line, scope)  # noqa: S102 - lines written here, from numbers and shapes
                if not same(a, scope.get(var)):
                    more = edits(a, scope.get(var), var)
                    if more is None:
                        return None
                    for line in more:
                        exec(line, scope)  # noqa: S102
                    lines = lines + more
        except Exception:  # noqa: BLE001 - a recipe that does not run is simply not used
            return None
        return (lines, scope, rngs) if same(a, scope.get(var)) else None

    def _best(self, a, var):
        """The shortest recipe that gives ``a``, trying the cheap kinds first: its seeded
        draw, a constant or V = I; then derivations from arrays built so far; then from
        battery arrays of a related shape, drawn for it."""
        found = []
        entry = DRAWN.get(id(a))
        if entry and entry[0]() is a and entry[1] in STREAMS:
            found.append(self._redraw(a, var, entry[1], entry[2], [], self.scope, self.rngs))
        shaped = constant(a, var)
        if shaped:
            found.append(self._run(a, var, shaped, self._trial(), dict(self.rngs)))
        for bases in (self._built_bases(a), self._product_bases(a), self._drawn_bases(a)):
            if any(found):
                break
            for base_var, base, lines, scope, rngs in bases:  # lines: already run in scope
                for recipe in self._by_orders(a, var, base_var, base) + \
                        list(derivations(a, var, base_var, base)):
                    made = self._run(a, var, recipe, self._trial(scope), dict(rngs))
                    if made is not None:
                        found.append((lines + made[0],) + made[1:])
        found = [f for f in found if f is not None]
        return min(found, key=lambda f: _cost(f[0]), default=None)

    def _by_orders(self, a, var, base_var, base):
        """``a`` as ``base`` taken by an order named already, along an axis of its length."""
        if not self.orders or a.shape != base.shape:
            return []
        return [[f"{var} = np.take({base_var}, {name}, axis={axis - a.ndim})"]
                for order, name in self.orders.items() for axis in range(a.ndim)
                if a.shape[axis] == len(order)]

    def _redraw(self, a, var, key, index, lines, scope, rngs):
        if index >= len(STREAMS.get(key, ())):  # a traced generator's key holds its id, which
            return None  # a later generator may reuse with fewer draws: nothing to redraw
        scope, rngs, lines = self._trial(scope), dict(rngs), list(lines)
        rng, made = rngs.get(key, (None, 0))
        if rng is None or made > index:  # a fresh generator for the stream
            rng, made = f"rng{sum(k.startswith('rng') for k in scope) + 1}", 0
            lines.append(f"{rng} = np.random.default_rng({SEEDS.get(key, list(key))})")
        for i in range(made, index + 1):
            lines += [s.format(x=var if i == index else "_", rng=rng) for s in STREAMS[key][i]]
        rngs[key] = (rng, index + 1)
        return self._run(a, var, lines, scope, rngs)

    def _built_bases(self, a):
        """(variable, array, lines, scope, rngs) for the arrays built so far ``a`` may derive
        from (no lines needed)."""
        return [(var, value, [], self.scope, self.rngs) for var, value in self._built()
                if related(a, value)]

    def _product_bases(self, a):
        """The same for the projections X @ W of self-attention calls whose shape ``a`` may
        derive from (with SDPA's singleton head axis when ``a`` has it), with the lines that
        make X and W: each is an array built so far, or redrawn from its seeded stream."""
        if a.dtype == bool:
            return
        for x_ref, w_refs in list(PROJECTED.values()):
            x = x_ref()
            for w in (r() for r in w_refs):
                if x is None or w is None or x.shape[-1] != w.shape[0]:
                    continue
                shape = x.shape[:-1] + w.shape[1:]  # (..., T, d)
                if a.ndim > len(shape):  # (N, 1, T, d): how SDPA takes self-attention
                    shape = shape[:-2] + (1,) * (a.ndim - len(shape)) + shape[-2:]
                if len(shape) != a.ndim or sum(m != n for m, n in zip(shape, a.shape)) > 1:
                    continue
                made = self._sources(((x, "X"), (w, "W")))
                if made is None:
                    continue
                (x_var, w_var), lines, scope, rngs = made
                product, expr = x @ w, f"({x_var} @ {w_var})"
                if product.shape != shape:
                    product, expr = product.reshape(shape), f"{expr}.reshape({shape})"
                yield expr, product, lines, scope, rngs

    def _sources(self, arrays):
        """((variable, ...), lines, scope, rngs) naming each (array, role): one built so far,
        or one redrawn from its seeded stream in a trial scope; None when one is neither."""
        names, lines, scope, rngs = [], [], self.scope, self.rngs
        for a, role in arrays:
            var = self._known(a)
            if var is None:
                entry = DRAWN.get(id(a))
                if not entry or entry[0]() is not a or entry[1] not in STREAMS:
                    return None
                var = next(f"{role}_{i}" for i in range(1, 10**6) if f"{role}_{i}" not in scope)
                drawn = self._redraw(a, var, entry[1], entry[2], lines, scope, rngs)
                if drawn is None:
                    return None
                lines, scope, rngs = drawn
            names.append(var)
        return tuple(names), lines, scope, rngs

    def _drawn_bases(self, a):
        """The same for battery arrays of a related shape, with the lines that draw them."""
        tried = 0
        for ref, key, index in list(DRAWN.values()):
            base = ref()
            if base is None or index >= len(STREAMS.get(key, ())) or id(base) in self.names \
                    or not related(a, base):
                continue
            tried += 1
            if tried > MAX_BASES:
                return
            var = f"base{sum(k.startswith('base') for k in self.scope) + 1}"
            drawn = self._redraw(base, var, key, index, [], self.scope, self.rngs)
            if drawn is not None:
                yield (var, base) + drawn


def readable(order):
    """An index order as the shortest NumPy that makes it: a roll or a reversal of
    ``np.arange``, a range, or the list."""
    n, order = len(order), list(order)
    for k in range(1, n):
        if order == np.roll(np.arange(n), k).tolist():
            return f"np.roll(np.arange({n}), {k})"
    if n > 1 and order == list(range(n - 1, -1, -1)):
        return f"np.arange({n})[::-1]"
    if n > 1 and order == list(range(order[0], order[0] + n)):
        return f"np.arange({order[0]}, {order[0] + n})"
    return f"np.array({order})"
