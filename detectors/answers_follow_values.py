"""An answer follows the arguments' values, whatever the caller did with earlier objects.

A side-effect check (C7) on what a caller may do between two calls. Callers refill the same
tensors in place (a KV cache, a preallocated batch, a staging buffer) and write into the
answers they were handed (an in-place residual add); a correct function of values cannot
tell. An implementation that memoises by object — ``functools.lru_cache`` on tensors, which
hash by ``id()``, a cache keyed by ``data_ptr()`` — answers the refilled objects with the old
values' answer; one that hands out a buffer it reads again lets the caller's write into the
next answer. For a few calls A (smallest, middle, largest) and B, A with other values of the
same shapes, the sandbox keeps A's argument objects and answers (:mod:`attnzoo.sandbox.caller`):

1. B made on A's objects refilled in place equals B made on new objects;
2. A made afresh afterwards equals A's first answer (equal values in new objects, after the
   old ones were refilled);
3. A made again on that call's own objects, after the caller wrote NaN into the answer it
   returned, equals A's first answer.

Each is bit for bit: the same values in the same layout, as :mod:`determinism` compares.
(A call's answer after calls of other sizes is :mod:`call_order_independence`'s property; an
answer read again after later calls is :mod:`answers_stay_as_returned`'s.)
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION

PROPERTY = ("An answer depends on the argument values only: the same objects refilled in place "
            "give the new values' answer, new objects give the old one, and writing into a "
            "returned answer changes no later answer.")
CLAUSES = ("C7",)
ORACLE = "side-effect"
NEEDS = {"attention": ATTENTION}
REFILLED = "the same input objects refilled in place with new values, against new objects"
AFRESH = "equal values in new objects, after the first call's objects were refilled"
WRITTEN = "the same input objects again, after the caller wrote NaN into the answer returned"


def picks(calls):
    """The smallest, a middle and the largest call."""
    chosen = [calls[0], calls[len(calls) // 2], calls[-1]] if calls else []
    return list({id(c): c for c in chosen}.values())


def other_values(call):
    """``call`` with other values in arrays of the same shapes: queries negated, keys in
    reverse order, values negated (its mask, bias and keywords as they were)."""
    return call.with_(q=-call.q, k=call.k[..., ::-1, :].copy(), v=-call.v)


def compare(subject, call, made, first, then, relation, names):
    """``then`` equals ``first``; ``made`` are the answers in the order made, for the
    reproduction (it repeats the caller's actions between them)."""
    with subject.case(call.name, *made, relation=relation):
        expect.identical(first.out, then.out, names=names)
        if first.weights is not None:
            expect.identical(first.weights, then.weights, "weights", names)


def check(subject, battery):
    if not subject.uses("attention"):
        return
    w = subject.weights_free  # a lesson function returns its weights: compare both
    for a in picks(subject.cases(battery)):
        b = other_values(a)
        with subject.trial(a):
            first = subject.attend(a, weights=w, keep=True)
            refilled = subject.attend(b, weights=w, refill=first.kept)
            fresh = subject.attend(b, weights=w)
            compare(subject, a, (first, refilled, fresh), fresh, refilled, REFILLED,
                    ("f(new objects)", "f(refilled objects)"))
            afresh = subject.attend(a, weights=w, keep=True)
            compare(subject, a, (first, refilled, afresh), first, afresh, AFRESH,
                    ("1st f(x)", "f(x) afresh"))
            again = subject.attend(a, weights=w, refill=afresh.kept, overwrite=afresh.kept)
            compare(subject, a, (first, afresh, again), first, again, WRITTEN,
                    ("1st f(x)", "f(x) after the write"))
