"""What a failed case claims, in terms a standalone script can check again.

A reproduction script (``detectors.kit.script``) repeats the calls; to fail as the detector did,
it makes the same comparison. The comparison is read off the failure, never off the detector's
name: the arrays an ``expect`` assertion compared (:class:`~detectors.kit.expect.Compared`) are
matched against the answers of the calls — the same object, equal values, the values reshaped,
or the values taken along one axis (a permutation, a prefix, some rows) — so that
``f(x)[P] = f(x[P])`` becomes ``np.take(r1, perm, axis=-2)`` against ``r2``. A claim is read
when the case fails and keeps index orders, never arrays: a detector may record dozens of
failing cases whose reproductions are never written.
"""

from dataclasses import dataclass

import numpy as np

from detectors.kit.derive import same


@dataclass(frozen=True)
class Side:
    """An answer's array as the script gets it from a result: output ``part`` of call ``call``
    (an index into the distinct requests), then ``steps``: ("crop", Ev) keeps the first Ev
    columns of a padded call, ("reshape", shape), ("take", order, axis). It is read as the
    call returned it, unless ``late``."""

    call: int
    part: int = 0
    steps: tuple = ()
    late: bool = False  # read after every later call, as a detector rereads a kept answer


@dataclass(frozen=True)
class Claim:
    """What the script checks.

    ``kind``: "oracle" (call ``call``'s output ``part``, or every output of every call when
    ``call`` is None, against exact attention), "relation" (``got`` against ``want``, two of
    the implementation's own outputs), "finite", "constant" (``got`` is ``value`` everywhere:
    the known answer of a call with dropout, which has no exact one), "words" (a property of
    dropout's draws, which no comparison restates), "dtype" (output ``part`` has dtype ``dtype``),
    "answer" (the call returns at all), "unchanged" (the call leaves ``args`` as they were) or
    "gradient" (the gradient of ``args[0]``, of every input for a failed gradcheck, against
    exact attention's). ``atol`` is the allowance of the failed comparison (None where it
    stated none)."""

    kind: str
    call: int | None = 0
    part: int | None = None
    want: Side | None = None
    got: Side | None = None
    atol: float | None = None
    names: tuple = ()
    dtype: str = ""
    args: tuple = ()
    value: float | None = None  # "constant": the one number every entry of ``got`` should be
    shape: tuple = ()  # … in an array of this shape


def distinct(requests):
    """The requests, each once: an answer read again after later calls (``subject.reread``)
    holds the request it was first made by, which the script makes once."""
    return list({id(r): r for r in requests}.values())


def crashed(requests):
    """The claim of a call that raised, hung or returned no answer: the last one."""
    return Claim("answer", call=len(requests) - 1)


def of(mismatch, answers):
    """The claim of a failed comparison on ``answers`` (each with its ``requests``)."""
    sides = _sides(answers)
    for i, answer in enumerate(answers):
        if answer.requests[0].gradcheck:  # torch.autograd.gradcheck failed on it
            return Claim("gradient", call=_first(answers, i))
    changed = [(i, a) for i, a in enumerate(answers) if getattr(a, "mutated", None)]
    if changed:
        i, answer = changed[0]
        return Claim("unchanged", call=_first(answers, i), args=tuple(answer.mutated))
    compared = getattr(mismatch, "compared", None)
    first = 0 if answers else None
    dropout = [bool(r.kwargs.get("dropout_p")) for r in distinct(_requests(answers))]
    if compared is None:  # a property stated in words: what exact attention would answer
        for i, answer in enumerate(answers):
            if answer.requests[0].grad is not None and not dropout[_first(answers, i)]:
                return Claim("gradient", call=_first(answers, i))  # e.g. a gradient missing
        return Claim("words" if any(dropout) else "oracle", call=first)
    if compared.kind == "dtype":
        return Claim("dtype", call=first, part=1 if compared.what == "weights" else 0,
                     dtype=compared.want)
    if compared.kind == "close" and compared.what.startswith("d"):
        name = compared.what[1:]
        for i, answer in enumerate(answers):
            if any(g is compared.got for g in (getattr(answer, "grads", None) or {}).values()):
                return Claim("gradient", call=_first(answers, i), args=(name,),
                             atol=compared.atol)
    got = resolve(compared.got, sides)
    if compared.kind == "finite":
        return Claim("finite", call=got.call if got else first, part=got and got.part)
    if compared.kind == "close" and got is not None and dropout[got.call]:
        want = np.asarray(compared.want)  # no exact answer: the detector's, if one number
        if want.size and want.dtype != bool and (want == want.flat[0]).all():
            return Claim("constant", call=got.call, got=got, atol=compared.atol,
                         value=float(want.flat[0]), shape=want.shape)
        return Claim("words", call=got.call)
    if compared.kind == "close":
        return Claim("oracle", call=got.call if got else first, part=got and got.part,
                     atol=compared.atol)
    want = resolve(compared.want, sides)
    if got is None or want is None or got == want:  # not two sides the script can name:
        # every call against exact attention, at the relation's allowance (bit for bit
        # between two outputs is no allowance against exact attention: the stated one then)
        return Claim("oracle", call=None, atol=compared.atol or None)
    return Claim("relation", want=want, got=got, atol=compared.atol, names=compared.names)


def _requests(answers):
    return [r for a in answers for r in a.requests]


def _first(answers, i, k=0):
    """The index, among the distinct requests, of answer ``i``'s request ``k``."""
    request = answers[i].requests[k]
    return next(n for n, r in enumerate(distinct(_requests(answers))) if r is request)


def _sides(answers):
    """(Side, array) for every array the answers hold: out, and the weights (a lesson
    function's second output, or the output of the V = I call an SDPA answer read them by).
    An answer whose request an earlier answer made is that call's result read again, late."""
    found, seen = [], set()
    for i, answer in enumerate(answers):
        requests = answer.requests
        late = id(requests[0]) in seen
        seen |= {id(r) for r in requests}
        found.append((_side(_first(answers, i), 0, requests[0], answer.out, late), answer.out))
        if answer.weights is not None:
            if requests[0].fn == "sdpa" and len(requests) > 1:
                found.append((_side(_first(answers, i, 1), 0, requests[1], answer.weights,
                                    late), answer.weights))
            elif requests[0].fn != "sdpa":
                found.append((_side(_first(answers, i), 1, requests[0], answer.weights, late),
                              answer.weights))
    return [(s, np.asarray(a)) for s, a in found if isinstance(a, np.ndarray)]


def _side(call, part, request, array, late=False):
    """How the script gets ``array`` from the call's result: cropped back from a padded twin,
    reshaped where the subject unfolded it (SDPA's self-attention)."""
    steps = ()
    crop = getattr(request, "crop", None)
    if crop:
        steps += (("crop", crop[1]),)
    returned = _shape(request, part, crop)
    if returned is not None and isinstance(array, np.ndarray) and array.shape != returned:
        steps += (("reshape", array.shape),)
    return Side(call, part, steps, late)


def _shape(request, part, crop):
    """The shape of output ``part`` as an attention call returns it (after a crop); None for
    another function."""
    if request.fn not in ("attention", "sdpa"):
        return None
    q, k, v = request.args[:3]
    width = crop[1] if crop else (k.shape[-2] if part == 1 else v.shape[-1])
    return q.shape[:-1] + (width,)


def resolve(x, sides):
    """The Side whose array is ``x``: the same object, equal values, the values reshaped,
    or the values taken along one axis; None when none is."""
    if not isinstance(x, np.ndarray):
        return None
    for side, a in sides:
        if a is x:
            return side
    for side, a in sides:
        if same(x, a):
            return side
    for side, a in sides:
        if a.size == x.size and a.shape != x.shape and same(x, a.reshape(x.shape)):
            return Side(side.call, side.part, side.steps + (("reshape", x.shape),), side.late)
    for side, a in sides:
        if a.ndim != x.ndim or a.dtype != x.dtype and (a.dtype == bool or x.dtype == bool):
            continue
        for axis in range(-a.ndim, 0):
            if any(m != n for i, (m, n) in enumerate(zip(a.shape, x.shape)) if i != a.ndim + axis):
                continue
            order = taken(x, a, axis)
            if order is not None:
                return Side(side.call, side.part, side.steps + (("take", order, axis),),
                            side.late)
    return None


def taken(x, a, axis):
    """Indices ``i`` with ``x == np.take(a, i, axis)`` (NaN equal to NaN), or None. A first
    slice of ``x`` found nowhere in ``a`` ends the search before any slice is copied."""
    rows = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
    head = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)[:1]
    if head.size and not (a.dtype != bool and np.isnan(head).any()) \
            and not (rows == head).all(axis=1).any():
        return None
    first = {}
    for j in range(a.shape[axis]):
        first.setdefault(np.take(a, [j], axis=axis).tobytes(), j)
    order = tuple(first.get(np.take(x, [i], axis=axis).tobytes()) for i in range(x.shape[axis]))
    return None if None in order else order
