"""Comparisons that raise a :class:`Flag` carrying the first offending index and both values."""

import numpy as np

from detectors.kit.verdict import KILLED, NAN, Flag


def fmt(x):
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    return f"{float(x):.6g}"


def at(name, index):
    return f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name


def baseline(subject, call):
    """The subject's own answer to ``call`` (checked for shape) and the error allowed on it:
    the starting point of every relation that compares the subject with itself."""
    from detectors.kit.tolerance import allowance

    answer = subject.attend(call)
    out = call.expected(subject.target.causal_alignment)[0]
    same_shape(subject, [answer], answer.out, out.shape, "out", call.name)
    return answer, allowance(subject, call, out)


def close(subject, answers, actual, expected, atol, what="out", case="", relation=""):
    """Flag unless ``actual`` has ``expected``'s shape and every entry is within ``atol``."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    same_shape(subject, answers, actual, expected.shape, what, case, relation)
    both_nan = np.isnan(actual) & np.isnan(expected)
    same_inf = np.isinf(actual) & (actual == expected)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(actual - expected) <= atol) & ~both_nan & ~same_inf
    if not bad.any():
        return
    index = tuple(np.argwhere(bad)[0])
    got, want = actual[index], expected[index]
    verdict = NAN if not np.isfinite(got) and np.isfinite(want) else KILLED
    evidence = subject.evidence(answers, case, index, relation)
    raise Flag(because(f"{at(what, index)} = {fmt(want)} (± {atol:.2g})", relation), fmt(got),
               evidence, verdict)


def equal(subject, answers, actual, expected, what="out", case="", relation=""):
    """Flag unless the two arrays are identical, bit for bit (NaN equal to NaN)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    same_shape(subject, answers, actual, expected.shape, what, case, relation)
    if actual.dtype == bool or expected.dtype == bool:
        bad = actual != expected
    else:
        bad = ~((actual == expected) | (np.isnan(actual) & np.isnan(expected)))
    if not bad.any():
        return
    index = tuple(np.argwhere(bad)[0])
    evidence = subject.evidence(answers, case, index, relation)
    raise Flag(because(f"{at(what, index)} = {fmt(expected[index])} exactly", relation),
               fmt(actual[index]), evidence)


def because(expected, relation):
    """The expectation with the relation that makes it one, when there is one."""
    return f"{expected} ({relation})" if relation else expected


def same_shape(subject, answers, actual, shape, what="out", case="", relation=""):
    if actual.shape != tuple(shape):
        evidence = subject.evidence(answers, case, None, relation)
        raise Flag(f"{what} of shape {tuple(shape)}", f"shape {actual.shape}", evidence)


def finite(subject, answers, actual, what="out", case="", relation=""):
    """Flag the first NaN or inf."""
    actual = np.asarray(actual)
    bad = ~np.isfinite(actual)
    if bad.any():
        index = tuple(np.argwhere(bad)[0])
        evidence = subject.evidence(answers, case, index, relation)
        raise Flag(f"{at(what, index)} finite", fmt(actual[index]), evidence, NAN)


def holds(subject, answers, ok, expected, actual, case="", index=None, relation=""):
    """Flag with free-form expected/actual texts unless ``ok``."""
    if not ok:
        raise Flag(because(expected, relation), actual,
                   subject.evidence(answers, case, index, relation))


def dtype(subject, answers, got, want, what="out", case=""):
    if got != want:
        raise Flag(f"{what} of dtype {want}", got, subject.evidence(answers, case))
