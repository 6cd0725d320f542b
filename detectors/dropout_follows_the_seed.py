"""Dropout patterns follow torch's random state: a seed reproduces them, a call without reseeding
draws a new one.

A special-input check on S5 across calls, read through V = I so that the output's zeros are the
drop pattern. Four calls in a row: A after seeding, B without reseeding, C after seeding to the
same value, D without reseeding. The state after a seed is a function of the seed, so C repeats A
and D repeats B, bit for bit. B draws from the state A left: its pattern is independent of A's,
so at each position the two agree (both kept or both dropped) with probability
c = p² + (1 − p)², and by Hoeffding's inequality P(agree/n − c ≥ t) ≤ exp(−2nt²), tested at
ALPHA. A kernel whose random offset never advances repeats its pattern on every call (agreement
1); one that keeps its own generator, unseeded by torch's, does not repeat after a reseed.
"""

import math

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import weights_call
from detectors.kit.needs import ATTENTION

PROPERTY = "The same seed gives the same dropout pattern bit for bit, and a call without reseeding draws an independent one."
CLAUSES = ("S5",)
ORACLE = "special-input"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",),
                      why="dropout is an SDPA argument; the lesson contract has none")
P = 0.5  # agreement by chance is smallest (c = 1/2) here
ALPHA = 1e-6  # the false-alarm probability of the agreement test, on any seed
SHAPE = (2, 4, 16, 24)  # (N, H, L, S): 3072 weights


def agreement_finding(first, second):
    """(expected, got) when two patterns agree more than independent draws may, else None."""
    agree, n = float((first == second).mean()), first.size
    c = P * P + (1 - P) * (1 - P)
    t = math.sqrt(math.log(1 / ALPHA) / (2 * n))
    if agree - c <= t:
        return None
    return (f"patterns of two calls in a row to agree on at most {c:g} + {t:.3f} of "
            f"{expect.plural(n, 'weight')} (independent draws)", f"{agree:.4f}")


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    call = weights_call(rng, SHAPE, "dropout seeds")  # V = I: out is the weights
    drop = {"dropout_p": P}
    with subject.trial(call):
        # nothing may run between these four calls: each continues the state the last one left
        a = subject.attend(call, extra=drop, seed=battery.seed)
        b = subject.attend(call, extra=drop)
        c = subject.attend(call, extra=drop, seed=battery.seed)
        d = subject.attend(call, extra=drop)
        with subject.case(call.name, a):
            expect.same_shape(a.out, SHAPE)
        with subject.case(call.name, a, c, relation="a reseed to the same value repeats the call"):
            expect.identical(a.out, c.out, names=("f(x) after seeding", "f(x) after reseeding"))
        with subject.case(call.name, a, b, c, d,
                          relation="after the same seed, the next call repeats as well"):
            expect.identical(b.out, d.out, names=("2nd f(x) after seeding",
                                                  "2nd f(x) after reseeding"))
        with subject.case(call.name, a, b,
                          relation="two calls without reseeding draw independent patterns"):
            finding = agreement_finding(a.out != 0, b.out != 0)
            if finding:
                expect.fail(*finding)
