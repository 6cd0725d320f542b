"""Dropout over the whole range of p: 0 is no dropout, 1 drops everything, and between them each
weight is 0 or w/(1 − p) with a share 1 − p kept.

A special-input check on S5, read through V = I so that the output is the dropped weight matrix.
At p = 0 the call is the plain call bit for bit, whatever the seed. At p = 1 nothing survives:
the output is exactly 0 and finite (the rescale 1/(1 − p) is infinite there, and a kernel that
applies it to the dropped weights gets 0 · ∞ = NaN). At each p of RATES every entry is 0 or the
weight over 1 − p, and the number kept among the n weights is Binomial(n, 1 − p). The keep share
is judged with the Chernoff bound in its relative-entropy form, P(kept/n ≥ a) ≤ exp(−n·KL(a ‖ q))
above q = 1 − p and likewise below, which stays tight at p = 0.99 where Hoeffding's band is wider
than the mean itself. Each rate is tested at ALPHA / len(RATES), so a correct dropout is flagged
with probability at most ALPHA on any seed.
"""

import math

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import weights_call
from detectors.kit.needs import ATTENTION

PROPERTY = "dropout_p = 0 changes nothing, dropout_p = 1 gives exactly 0, and at every p between each weight is 0 or w/(1−p) with a share 1 − p kept."
CLAUSES = ("S5",)
ORACLE = "special-input"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",),
                      why="dropout is an SDPA argument; the lesson contract has none")
RATES = (0.05, 0.5, 0.9, 0.99)
ALPHA = 1e-6  # the false-alarm probability of the keep-share tests together, on any seed
EACH = ALPHA / len(RATES)  # each rate's share of it (the union bound)
SHAPE = (4, 6, 24, 40)  # (N, H, L, S): 23040 weights, about 230 of them kept at p = 0.99


def kl(a, q):
    """KL(a ‖ q) between Bernoulli(a) and Bernoulli(q), 0 · log 0 read as 0."""
    return sum(x * math.log(x / y) for x, y in ((a, q), (1 - a, 1 - q)) if x > 0)


def band(n, q, alpha=EACH):
    """(low, high): the keep shares a with 2·exp(−n·KL(a ‖ q)) > alpha, found by bisection."""
    limit = math.log(2 / alpha) / n

    def edge(inside, outside):
        for _ in range(60):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if kl(mid, q) <= limit else (inside, mid)
        return inside

    return edge(q, 0.0), edge(q, 1.0)


def share_finding(kept, p):
    """(expected, got) when the share of ``kept`` (bool) is outside its band at rate p, else None."""
    share, (low, high) = float(kept.mean()), band(kept.size, 1 - p)
    if low <= share <= high:
        return None
    return (f"a share of {1 - p:g} kept, within [{low:.4f}, {high:.4f}] of "
            f"{expect.plural(kept.size, 'weight')} (Chernoff bound)", f"{share:.4f}")


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    call = weights_call(rng, SHAPE, "dropout rates")  # V = I: out is the weights
    plain = subject.attend(call)
    with subject.case(call.name, plain):
        expect.same_shape(plain.out, SHAPE)
    atol = subject.allowance(call, subject.expected(call)[1], what="weights")
    with subject.trial("dropout_p=0"):
        zero = subject.attend(call, extra={"dropout_p": 0.0}, seed=battery.seed + 1)
        with subject.case("dropout_p=0", plain, zero,
                          relation="dropout_p=0 is no dropout, whatever the seed"):
            expect.identical(plain.out, zero.out, names=("f(x)", "f(x, dropout_p=0)"))
    with subject.trial("dropout_p=1"):
        every = subject.attend(call, extra={"dropout_p": 1.0}, seed=battery.seed)
        with subject.case("dropout_p=1", every, relation="dropout_p=1 drops every weight"):
            expect.finite(every.out)
            expect.equal(every.out, np.zeros(SHAPE))
    for p in RATES:
        with subject.trial(f"dropout_p={p}"):
            dropped = subject.attend(call, extra={"dropout_p": p}, seed=battery.seed)
            with subject.case(f"dropout_p={p}", plain, dropped,
                              relation=f"with V = I the output is the dropped weights ({p=})"):
                expect.same_shape(dropped.out, SHAPE)
                zero = dropped.out == 0
                bad = ~(zero | (np.abs(dropped.out - plain.out / (1 - p)) <= atol / (1 - p)))
                if bad.any():
                    index = expect.first(bad)
                    expect.fail(f"{expect.at('out', index)} = 0 or "
                                f"{expect.fmt(plain.out[index] / (1 - p))} (w / (1 - {p}))",
                                expect.fmt(dropped.out[index]), index)
                finding = share_finding(~zero, p)
                if finding:
                    expect.fail(*finding)
