"""Dropout zeroes attention weights with probability p and scales the survivors by 1/(1 − p).

A special-input check on S5, read through V = I so that the output is the dropped-out weight
matrix itself: every entry must be 0 or the undropped weight divided by (1 − p), and the share
of zeros must match p (within six standard deviations, so a correct implementation fails about
once in 10⁹ runs). Dropout without the rescale, dropout on the scores before softmax, or a
fixed rate that ignores ``dropout_p`` all fail.
"""

import math

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import Call
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION
from detectors.kit.specs import Spec

PROPERTY = "With dropout_p = p each weight is 0 or w/(1−p), and about a share p of them is 0."
CLAUSES = ("S5",)
ORACLE = "special-input"
RATES = (0.5, 0.2)
SIGMAS = 6.0
NEEDS = ATTENTION.but(contracts=("sdpa",), keywords=("dropout_p",),
                      why="dropout is an SDPA argument; the lesson contract has none")


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    q, k = grid(rng, (2, 4, 16, 5)), grid(rng, (2, 4, 24, 5))
    eye = np.broadcast_to(np.eye(24), (2, 4, 24, 24)).copy()  # V = I: out is the weights
    call = Call(Spec("dropout", q.shape, k.shape, eye.shape), q, k, eye, name="dropout")
    plain = subject.attend(call)
    weights = subject.expected(call)[1]
    atol = subject.allowance(call, weights, what="weights")
    for p in RATES:
        with subject.trial(f"dropout_p={p}"):
            dropped = subject.attend(call, extra={"dropout_p": p}, seed=battery.seed)
            with subject.case(call.name, dropped):
                expect.same_shape(dropped.out, weights.shape)
            kept = np.abs(dropped.out - plain.out / (1 - p)) <= atol / (1 - p)
            zero = dropped.out == 0
            bad = ~(kept | zero)
            with subject.case(f"dropout_p={p}", plain, dropped,
                              relation="with V = I the output is the dropped weights"):
                if bad.any():
                    index = expect.first(bad)
                    expect.fail(f"{expect.at('out', index)} = 0 or "
                                f"{expect.fmt(plain.out[index] / (1 - p))} (w / (1 - {p}))",
                                expect.fmt(dropped.out[index]), index)
            n = plain.out.size
            share = zero.mean()
            band = SIGMAS * math.sqrt(p * (1 - p) / n)
            with subject.case(f"dropout_p={p}", plain, dropped,
                              relation=f"{expect.plural(n, 'weight')} with dropout_p={p}"):
                expect.holds(abs(share - p) <= band, f"a share of zeros within {p} ± {band:.3f}",
                             f"{share:.3f}")
