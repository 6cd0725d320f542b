"""Dropout as one object across rates, calls and the backward: the statistics of the three
detectors hold their stated false-alarm rate, a request without a seed continues the random
state the previous call left (in this process and in a worker), each new zoo entry is caught
with the message that names its mistake, and the reference and every decoy are clean (the
hand-made wrong cases are in test_detectors.py)."""

import math

import numpy as np
import pytest

import detectors.dropout_across_rates as rates
import detectors.dropout_follows_the_seed as seeds
from attnzoo.matrix import model as matrix
from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.isolated import Isolated
from attnzoo.sandbox.target import Target
from detectors import by_name
from detectors.kit.battery import Battery
from detectors.kit.calls import Request
from detectors.kit.subject import Subject
from reference.sdpa import scaled_dot_product_attention

FAMILY = ("dropout_across_rates", "dropout_follows_the_seed",
          "dropout_backward_uses_forward_mask")


# -- the keep share: a Chernoff band that spends no more than it says ---------------------------

def log_binomial_tail(n, q, k, upper):
    """log P(X >= k) (upper) or log P(X <= k) for X ~ Binomial(n, q), summed exactly."""
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
             + i * math.log(q) + (n - i) * math.log1p(-q)
             for i in (range(k, n + 1) if upper else range(0, k + 1))]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


@pytest.mark.parametrize("p", rates.RATES)
def test_the_keep_band_spends_at_most_its_share_of_alpha(p):
    n, q = math.prod(rates.SHAPE), 1 - p
    low, high = rates.band(n, q)
    assert low < q < high
    # the exact binomial mass outside the band is below what the bound promises
    outside = (math.exp(log_binomial_tail(n, q, math.floor(low * n) - 1, upper=False))
               + math.exp(log_binomial_tail(n, q, math.ceil(high * n) + 1, upper=True)))
    assert outside <= rates.EACH


def test_the_band_at_p_0_99_is_tight_where_hoeffdings_is_not():
    n = math.prod(rates.SHAPE)
    low, high = rates.band(n, 0.01)
    assert 0.005 < low and high < 0.015  # Hoeffding's half-width here is about 0.02
    hoeffding = math.sqrt(math.log(2 * len(rates.RATES) / rates.ALPHA) / (2 * n))
    assert hoeffding > 0.01


@pytest.mark.parametrize("p", rates.RATES)
def test_independent_bernoulli_keep_shares_pass_over_many_seeds(p):
    for seed in range(500):
        kept = np.random.default_rng(seed).random(rates.SHAPE) >= p
        assert rates.share_finding(kept, p) is None, seed


@pytest.mark.parametrize("factor", [0.5, 1.5])
def test_half_or_one_and_a_half_the_keep_share_is_found_at_every_rate(factor):
    for p in rates.RATES:
        kept = np.random.default_rng(1).random(rates.SHAPE) < (1 - p) * factor
        assert "kept" in rates.share_finding(kept, p)[0], p


def test_independent_patterns_agree_by_chance_only():
    for seed in range(500):
        rng = np.random.default_rng(seed)
        a, b = (rng.random(seeds.SHAPE) >= seeds.P for _ in range(2))
        assert seeds.agreement_finding(a, b) is None, seed
    assert "independent draws" in seeds.agreement_finding(a, a)[0]


# -- a request without a seed continues the state the last call left ----------------------------

def dropout_request(seed):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 2, 4, 3)), rng.standard_normal((1, 2, 6, 3))
    eye = np.broadcast_to(np.eye(6), (1, 2, 6, 6)).copy()
    return Request("sdpa", (q, k, eye), {"dropout_p": 0.5}, seed=seed)


def four_calls(executor):
    return [executor.run(dropout_request(s)).values[0] for s in (3, None, 3, None)]


def assert_continued(a, b, c, d):
    assert np.array_equal(a, c) and np.array_equal(b, d)  # a seed fixes the calls after it
    assert not np.array_equal(a != 0, b != 0)  # the second call drew a new pattern


REFERENCE = Target("reference", "reference.sdpa:scaled_dot_product_attention", "sdpa", "torch")


def test_an_unseeded_request_continues_the_state_in_process():
    assert_continued(*four_calls(InProcess(REFERENCE, obj=scaled_dot_product_attention)))


def test_an_unseeded_request_continues_the_state_in_a_worker():
    executor = Isolated(REFERENCE)
    try:
        assert_continued(*four_calls(executor))
    finally:
        executor.close()


# -- the detectors on the zoo, the reference and the decoys -------------------------------------

def reference_sdpa():
    return Subject(REFERENCE, InProcess(REFERENCE, obj=scaled_dot_product_attention))


@pytest.mark.parametrize("name", FAMILY)
def test_torch_dropout_passes_over_many_seeds(name):
    for seed in range(20):
        finding = run(by_name()[name], reference_sdpa(), Battery(seed))
        assert finding.verdict == "survived", (seed, finding.message)


ENTRIES = {  # zoo row -> (the detector that catches it, verdict, what its message says)
    "dropout-offset-not-advanced-sdpa": ("dropout_follows_the_seed", "killed",
                                         "got 1.0000"),
    "dropout-backward-redraws-mask-sdpa": ("dropout_backward_uses_forward_mask", "killed",
                                           "with the forward's mask"),
    "dropout-backward-offset-reset-sdpa": ("dropout_backward_uses_forward_mask", "killed",
                                           "not reseeded after a call that drew"),
    "dropout-nan-at-p-one-sdpa": ("dropout_across_rates", "nan",
                                  "finite (dropout_p=1 drops every weight), got nan"),
}


# an entry whose defect another member's relation states too: NaN at p = 1 in the forward is
# NaN in the backward's p = 1 gradients as well
ALSO = {"dropout-nan-at-p-one-sdpa": {"dropout_backward_uses_forward_mask"}}


def _row(label):
    return next(r for r in matrix.rows() if r.label == label)


@pytest.mark.parametrize("label", ENTRIES)
def test_each_new_entry_is_caught_by_its_detector_alone(label):
    name, verdict, found = ENTRIES[label]
    for other in FAMILY:
        finding = run(by_name()[other], matrix.subject_for(_row(label)), Battery(0))
        if other == name:
            assert finding.verdict == verdict and found in finding.message, finding.message
        elif other in ALSO.get(label, ()):
            assert finding.caught, finding.message
        else:
            assert finding.verdict == "survived", finding.message


CLEAN = [r for r in matrix.rows() if r.kind != "bug"]


@pytest.mark.parametrize("row", CLEAN, ids=[r.label for r in CLEAN])
def test_reference_and_decoys_are_clean(row):
    for name in FAMILY:
        finding = run(by_name()[name], matrix.subject_for(row), Battery(0))
        assert finding.verdict in ("survived", "n/a"), finding.message
