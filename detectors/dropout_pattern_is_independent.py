"""Dropout keeps each weight with probability 1 − p, independently across batch, heads and queries.

A statistical special input on S5, read through V = I so that the output is the dropped weight
matrix and its zeros are the drop pattern. Under correct dropout every weight is kept by its own
Bernoulli(1 − p) draw, so (i) the number kept among n weights is Binomial(n, 1 − p), and (ii)
two weights at the same position in different batch items, heads or query rows agree (both kept
or both dropped) with probability c = p² + (1 − p)², independently over disjoint pairs.
Hoeffding's inequality bounds both tails without any approximation: P(|kept/n − (1 − p)| ≥ t)
≤ 2·exp(−2nt²), and P(agree/m − c ≥ t) ≤ exp(−2mt²). Each of the TESTS tests is run at
ALPHA / TESTS, so by the union bound a correct dropout is flagged with probability at most
ALPHA = 1e-6 on any seed. A mask drawn for one head and broadcast to all, a mask shared by
the batch, or one row of randomness reused for every query agrees on every pair (c = 1).
"""

import math

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import weights_call
from detectors.kit.needs import ATTENTION

PROPERTY = "With dropout_p = p a share 1 − p of the weights is kept, and the drop pattern is independent across batch items, heads and queries."
CLAUSES = ("S5",)
ORACLE = "special-input"
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",),
                      why="dropout is an SDPA argument; the lesson contract has none")
RATES = (0.5, 0.2)
AXES = {"batch items": 0, "heads": 1, "queries": 2}  # axes of the (N, H, L, S) pattern
ALPHA = 1e-6  # the false-alarm probability of the whole detector, on any seed
TESTS = len(RATES) * (1 + len(AXES))
SHAPE = (4, 6, 24, 40)  # (N, H, L, S): every size differs, every axis has pairs


def band(n, alpha=ALPHA / TESTS, sides=2):
    """t with sides·exp(−2nt²) = alpha: Hoeffding's deviation for a mean of n Bernoullis."""
    return math.sqrt(math.log(sides / alpha) / (2 * n))


def keep_rate(kept, p):
    """(share kept, its allowed band) for the pattern ``kept`` (bool) at rate p."""
    return float(kept.mean()), band(kept.size)


def agreement(kept, axis):
    """(share of agreeing pairs, how many pairs): slices 0|1, 2|3, … along ``axis``."""
    n = kept.shape[axis] // 2 * 2
    a = np.take(kept, range(0, n, 2), axis=axis)
    b = np.take(kept, range(1, n, 2), axis=axis)
    return float((a == b).mean()), a.size


def findings(kept, p):
    """What is wrong with the pattern ``kept`` at rate p, as (expected, got) pairs."""
    out = []
    share, t = keep_rate(kept, p)
    if abs(share - (1 - p)) > t:
        out.append((f"a share of {1 - p:g} ± {t:.3f} kept", f"{share:.4f}"))
    c = p * p + (1 - p) * (1 - p)
    for name, axis in AXES.items():
        agree, m = agreement(kept, axis)
        t = band(m, sides=1)
        if agree - c > t:
            out.append((f"patterns of different {name} to agree on at most {c:g} + {t:.3f} of "
                        f"{m} pairs (independent draws)", f"{agree:.4f}"))
    return out


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    call = weights_call(rng, SHAPE, "dropout pattern")  # V = I: out is the weights
    plain = subject.attend(call)
    with subject.case(call.name, plain):
        expect.same_shape(plain.out, SHAPE)
        expect.holds(bool((plain.out > 0).all()), "every weight > 0 without dropout",
                     "a zero weight")
    for p in RATES:
        with subject.trial(f"dropout_p={p}"):
            dropped = subject.attend(call, extra={"dropout_p": p}, seed=battery.seed)
            with subject.case(f"dropout_p={p}", plain, dropped,
                              relation=f"with V = I the output is the dropped weights ({p=})"):
                expect.same_shape(dropped.out, SHAPE)
                for expected, got in findings(dropped.out != 0, p)[:1]:
                    expect.fail(expected, got)
