"""How one array is written from another, for reproductions (detectors.kit.reproduce).

A derivation is a candidate line — a copy, a negation, a float mask from a bool one, a shift
broadcast along axes, a scale, a permutation or prefix along one axis, a constant, V = I —
and edits are the lines that finish a copy: a block set or shifted, whole slices or rows of
one value, a few entries. Nothing here is trusted to be right: the caller runs every line
and compares the value with the array it stands for.
"""

import re

import numpy as np

SMALL = 32  # a shift or a row pattern of at most this many numbers is printed
MAX_EDITS = 48  # a copy with more changed entries than this is not "a few edits"
MAX_EDIT_LINES = 6  # nor is one that takes more lines of slices and rows than this


def same(a, b):
    return (isinstance(b, np.ndarray) and a.shape == b.shape
            and (a.dtype == bool) == (b.dtype == bool)
            and np.array_equal(a, b, equal_nan=a.dtype != bool))


def number(x):
    x = float(x)
    if np.isfinite(x):
        return repr(x)
    return "np.nan" if np.isnan(x) else f"{'-' if x < 0 else ''}np.inf"


def value(x, boolean):
    return repr(bool(x)) if boolean else number(x)


def literal(a):
    """``np.array([...])``: float64 or bool, as the request holds it (Python's repr of each
    float is the shortest that reads back exactly, as :func:`number`'s is)."""
    if a.dtype == bool:
        return f"np.array({_rows(repr(a.tolist()))})"
    body = repr(np.asarray(a, dtype=np.float64).tolist())
    if not np.isfinite(a).all():
        body = _NON_FINITE.sub(r"np.\1", body)
    return f"np.array({_rows(body)}, dtype=np.float64)"


def _rows(body):
    """One line per row of the last axis, as numpy prints them."""
    return body.replace("], [", "],\n [")


_NON_FINITE = re.compile(r"(?<![\w.])(nan|inf)\b")  # repr's words for them, as numpy names


def short(a):
    """A literal for an array of a few numbers: a scalar when they are all one value."""
    first = a.ravel()[0]
    if same(a, np.full(a.shape, first)):
        return value(first, a.dtype == bool)
    return literal(a)


def _span(ix):
    """``a:b`` for a contiguous run of indices (``a`` for one), else None."""
    ix = list(ix)
    if ix == list(range(ix[0], ix[-1] + 1)):
        return f"{ix[0]}:{ix[-1] + 1}" if len(ix) > 1 else str(ix[0])
    return None


def related(a, b):
    """Same shape, or the same kind and shape but for one axis: what a derivation bridges."""
    if a.ndim != b.ndim or not a.size:
        return False
    if (a.dtype == bool) != (b.dtype == bool):
        return a.shape == b.shape and b.dtype == bool  # a float mask made from a bool one
    return sum(x != y for x, y in zip(a.shape, b.shape)) <= 1


def constant(a, var):
    """One value everywhere, or V = I broadcast over the leading axes; else None."""
    first = a.ravel()[0]
    if same(a, np.full(a.shape, first)):
        return [f"{var} = np.full({a.shape}, {value(first, a.dtype == bool)})"]
    S = a.shape[-1]
    if a.ndim >= 2 and a.shape[-2] == S and same(a, np.broadcast_to(np.eye(S), a.shape)):
        return [f"{var} = np.broadcast_to(np.eye({S}), {a.shape}).copy()"]
    return None


def derivations(a, var, base_var, base):
    """Candidate lines making ``a`` from ``base`` (each then checked, with edits allowed)."""
    if base.dtype == bool and a.dtype != bool:
        kept, dropped = a[base], a[~base]
        if kept.size and dropped.size:
            yield [f"{var} = np.where({base_var}, {number(kept[0])}, {number(dropped[0])})"]
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
                    yield [f"{var} = {base_var} + {short(small)}"]
            c = ratio[np.isfinite(ratio)].ravel()[:1]
            if c.size and c[0] != 1:
                yield [f"{var} = {base_var} * {number(c[0])}"]
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


def edits(a, made, var):
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
            return [f"{var}[{', '.join(spans)}] = {short(small)}"]
        if a.dtype != bool:
            with np.errstate(all="ignore"):
                shift = _reduced(a[at] - made[at])
            if shift.size == 1 and np.isfinite(shift).all() \
                    and np.array_equal(made[at] + shift.ravel()[0], a[at]):
                return [f"{var}[{', '.join(spans)}] += {number(shift.ravel()[0])}"]
    made, lines = made.copy(), []
    for axis in range(a.ndim):  # whole slices of one value (a column of a mask, a key)
        for j in sorted(set(idx[axis].tolist())):
            want = np.take(a, j, axis=axis)
            if want.size > 1 and same(want, np.full(want.shape, want.ravel()[0])):
                at = (slice(None),) * axis + (j,)
                made[at] = want
                lines.append(f"{var}[{', '.join([':'] * axis + [str(j)])}] = "
                             f"{value(want.ravel()[0], a.dtype == bool)}")
    idx = _differ(a, made)
    if a.ndim > 1 and len(idx[0]):  # whole rows set to one pattern, a line per pattern
        rows = sorted(set(zip(*(i.tolist() for i in idx[:-1]))))
        groups = {}
        for row in rows:
            groups.setdefault(a[row].tobytes(), []).append(row)
        for group in groups.values():
            pattern = a[group[0]]
            if len(group) > 1 or same(pattern, np.full(pattern.shape, pattern[0])):
                lead = tuple(list(ix) for ix in zip(*group))
                made[lead] = pattern
                lines.append(f"{var}[{', '.join(str(ix) for ix in lead)}] = {short(pattern)}")
        idx = _differ(a, made)
    if len(idx[0]) > MAX_EDITS or len(lines) > MAX_EDIT_LINES:
        return None
    if len(idx[0]):
        lines.append(f"{var}[{', '.join(str(i.tolist()) for i in idx)}] = {short(a[idx])}")
    return lines


def _differ(a, made):
    """The indices where ``made`` is not ``a`` (NaN equal to NaN)."""
    differ = made != a
    if a.dtype != bool:
        differ &= ~(np.isnan(made) & np.isnan(a))
    return np.nonzero(differ)
