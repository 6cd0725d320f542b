"""Pure assertions on arrays (as chex's are): each returns, or raises a :class:`Mismatch` that
says where (the first offending index), what came back, what was due and the allowance.

They know nothing of calls or cases: ``subject.case(name, *answers, relation=…)`` wraps them
and attaches the calls, the case, the relation and the reproduction in one place. Two kinds of
comparison read differently, because they are different claims: :func:`close` compares the
implementation with a known answer ("expected … , got …"); :func:`agree` compares two of its
own outputs, which a metamorphic relation says are equal ("f(x)[i] = …, f(x′)[i] = …, should
be equal"). Each records what it compared (:class:`Compared`), so a reproduction can make
the same comparison in a script of its own.
"""

from dataclasses import dataclass

import numpy as np

from detectors.kit.verdict import KILLED, NAN


@dataclass(frozen=True)
class Compared:
    """What a failed comparison compared: ``kind`` is "close" (an answer against a known one),
    "agree" (two of the implementation's own outputs), "finite" or "dtype"; ``got`` and ``want``
    are the arrays (dtype names, for "dtype") as the detector passed them, ``atol`` the allowance
    (0: bit for bit), ``names`` how the message calls the two sides."""

    kind: str
    got: object
    want: object = None
    atol: float = 0.0
    what: str = "out"
    names: tuple = ("expected", "got")


class Mismatch(AssertionError):
    """A failed comparison: ``expected`` (what should hold) and ``actual`` (what came back)."""

    def __init__(self, expected, actual, index=None, verdict=KILLED, text="", compared=None):
        self.expected, self.actual, self.index, self.verdict = expected, actual, index, verdict
        self.text = text or f"expected {expected}, got {actual}"
        self.compared = compared  # a Compared, or None for a property stated in words
        super().__init__(self.text)

    def because(self, relation):
        """The same mismatch with the relation that makes it one."""
        if not relation:
            return self
        if self.text.endswith(")") and "should be equal (" in self.text:  # see agree
            text = f"{self.text[:-1]}; {relation})"
            return Mismatch(f"{self.expected[:-1]}; {relation})", self.actual, self.index,
                            self.verdict, text, self.compared)
        return Mismatch(f"{self.expected} ({relation})", self.actual, self.index, self.verdict,
                        compared=self.compared)


def fmt(x):
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    return f"{float(x):.6g}"


def digits(x, other):
    """``x`` with as many significant digits as it takes to tell it from ``other`` (at least
    six), so two numbers that differ never print alike."""
    x, other = float(x), float(other)
    if not (np.isfinite(x) and np.isfinite(other)) or x == other:
        return fmt(x)
    for n in range(6, 18):
        if f"{x:.{n}g}" != f"{other:.{n}g}":
            return f"{x:.{n}g}"
    return repr(x)


def off_by(actual, expected):
    """`` (off by 1.2e-07)`` for two finite numbers that differ, else ""."""
    a, b = float(actual), float(expected)
    if not (np.isfinite(a) and np.isfinite(b)) or a == b:
        return ""
    return f" (off by {abs(a - b):.2g})"


def at(name, index):
    return f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name


def plural(n, word):
    """``1 token``, ``2 tokens``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def first(bad):
    return tuple(int(i) for i in np.argwhere(bad)[0])


def same_shape(actual, shape, what="out"):
    actual = np.asarray(actual)
    if actual.shape != tuple(shape):
        raise Mismatch(f"{what} of shape {tuple(shape)}", f"shape {actual.shape}")


def _far(actual, expected, atol):
    """Bool: entries further apart than ``atol`` (NaN matches NaN, inf matches the same inf)."""
    both_nan = np.isnan(actual) & np.isnan(expected)
    same_inf = np.isinf(actual) & (actual == expected)
    with np.errstate(invalid="ignore"):
        return ~(np.abs(actual - expected) <= atol) & ~both_nan & ~same_inf


def within(actual, expected, atol):
    """Does every entry of ``actual`` lie within ``atol`` of ``expected``? (:func:`close`'s
    test, for a detector that decides what to judge rather than judging.)"""
    return not _far(np.asarray(actual), np.asarray(expected), atol).any()


def close(actual, expected, atol, what="out"):
    """``actual`` has ``expected``'s shape and every entry is within ``atol`` of the answer."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    same_shape(actual, expected.shape, what)
    bad = _far(actual, expected, atol)
    if bad.any():
        index = first(bad)
        got, want = actual[index], expected[index]
        verdict = NAN if not np.isfinite(got) and np.isfinite(want) else KILLED
        raise Mismatch(f"{at(what, index)} = {digits(want, got)} (± {atol:.2g})",
                       digits(got, want) + off_by(got, want), index, verdict,
                       compared=Compared("close", actual, expected, atol, what))


def agree(before, after, atol, what="out", names=("f(x)", "f(x′)")):
    """Two outputs of the implementation that a relation says are equal (within ``atol``)."""
    before, after = np.asarray(before), np.asarray(after)
    same_shape(after, before.shape, f"{names[1]} {what}".strip())
    _differ(before, after, _far(after, before, atol), f"± {atol:.2g}", what, names,
            Compared("agree", after, before, atol, what, names))


def identical(before, after, what="out", names=("f(x)", "f(x′)")):
    """Two outputs that must be equal bit for bit (NaN equal to NaN)."""
    before, after = np.asarray(before), np.asarray(after)
    same_shape(after, before.shape, f"{names[1]} {what}".strip())
    _differ(before, after, _unequal(after, before), "exactly", what, names,
            Compared("agree", after, before, 0.0, what, names))


def _differ(before, after, bad, allowance, what, names, compared):
    if not bad.any():
        return
    index = first(bad)
    a, b = (f"{n}{'' if what == 'out' else ' ' + what}" for n in names)
    x, y = fmt(before[index]), fmt(after[index])
    if before.dtype != bool and after.dtype != bool:
        x, y = digits(before[index], after[index]), digits(after[index], before[index])
        gap = off_by(after[index], before[index])  # " (off by …)"
        allowance += f"; they differ by {gap[len(' (off by '):-1]}" if gap else ""
    got = f"{at(a, index)} = {x}, {at(b, index)} = {y}"
    verdict = NAN if not np.isfinite(after[index]) and np.isfinite(before[index]) else KILLED
    raise Mismatch(f"{at(a, index)} = {at(b, index)} ({allowance})", got, index, verdict,
                   f"{got}, should be equal ({allowance})", compared)


def _unequal(actual, expected):
    if actual.dtype == bool or expected.dtype == bool:
        return actual != expected
    return ~((actual == expected) | (np.isnan(actual) & np.isnan(expected)))


def equal(actual, expected, what="out"):
    """``actual`` is the known answer ``expected``, bit for bit (NaN equal to NaN)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    same_shape(actual, expected.shape, what)
    bad = _unequal(actual, expected)
    if bad.any():
        index = first(bad)
        raise Mismatch(f"{at(what, index)} = {fmt(expected[index])} exactly",
                       fmt(actual[index]), index, compared=Compared("close", actual, expected,
                                                                   0.0, what))


def finite(actual, what="out"):
    """No NaN or inf anywhere."""
    actual = np.asarray(actual)
    bad = ~np.isfinite(actual)
    if bad.any():
        index = first(bad)
        raise Mismatch(f"{at(what, index)} finite", fmt(actual[index]), index, NAN,
                       compared=Compared("finite", actual, what=what))


def dtype(got, want, what="out"):
    if got != want:
        raise Mismatch(f"{what} of dtype {want}", got, compared=Compared("dtype", got, want,
                                                                          what=what))


def holds(ok, expected, actual, index=None):
    """A property stated in words: ``expected`` should hold, ``actual`` is what was seen."""
    if not ok:
        fail(expected, actual, index)


def fail(expected, actual, index=None):
    """An unconditional failure, for a check whose test is not a comparison of arrays."""
    raise Mismatch(expected, actual, index)
