"""One plain pytest test per kind of oracle, for the lesson contract on NumPy.

The same kinds as the detectors (docs/test-design.md), each written the way a learner writes a
test: a fixture ``attention`` (the implementation under test), ``assert`` and ``np.testing``.

    attnzoo grade docs/lesson-tests/oracle_kinds.py

The gradient kind needs autograd: with NumPy there is none to test (see the `sdpa` example in
test-design.md). Every test makes its own arrays, so no test can see another's.
"""

import math

import numpy as np


def data(T_q=4, T_k=4, d_k=8, d_v=8, seed=0, batch=()):
    """q (…, T_q, d_k), k (…, T_k, d_k), v (…, T_k, d_v): multiples of 1/8, new each call."""
    rng = np.random.default_rng(seed)
    draw = lambda *shape: np.round(rng.standard_normal(batch + shape) * 8) / 8  # noqa: E731
    return draw(T_q, d_k), draw(T_k, d_k), draw(T_k, d_v)


def formula(q, k, v, mask=None):
    """softmax(Q Kᵀ / √d_k) V over the last two axes; a row with no allowed key gives 0."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)) @ v  # (..., T_q, d_v)


# -- known-answer: a worked example, the numbers the lesson prints ------------------------------

def test_known_answer_worked_example(attention):
    Q = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    out, w = attention.attention(Q, K, V, np.tril(np.ones((3, 3), dtype=bool)))
    np.testing.assert_allclose(np.round(w, 3), [[1, 0, 0], [0.196, 0.804, 0],
                                                [0.248, 0.248, 0.503]])
    np.testing.assert_allclose(np.round(out, 3), [[10, 0], [1.956, 8.044], [5, 5]])


# -- differential: a second implementation, on shapes the example does not have -----------------

def test_differential_rectangular_and_batched(attention):
    q, k, v = data(T_q=3, T_k=5, d_k=8, d_v=3, batch=(2, 3))  # d_v != d_k, T_q != T_k
    mask = np.random.default_rng(1).random((2, 3, 3, 5)) < 0.7
    mask[..., 0] = True  # every row keeps one key
    out, _ = attention.attention(q, k, v, mask.copy())
    q, k, v = data(T_q=3, T_k=5, d_k=8, d_v=3, batch=(2, 3))
    np.testing.assert_allclose(out, formula(q, k, v, mask), atol=1e-9)


def test_differential_self_attention_unbatched_then_longer(attention):
    rng = np.random.default_rng(2)
    W = [np.round(rng.standard_normal((16, 8)) * 8) / 32 for _ in range(3)]
    for T in (3, 6):  # a second call with another length: nothing cached from the first
        X = np.round(rng.standard_normal((T, 16)) * 8) / 8  # (T, d_model), no batch
        out, _ = attention.causal_self_attention(X, *W)
        causal = np.tril(np.ones((T, T), dtype=bool))
        np.testing.assert_allclose(out, formula(X @ W[0], X @ W[1], X @ W[2], causal),
                                   atol=1e-9)


# -- invariant: properties of one answer ---------------------------------------------------------

def test_invariant_weights_are_distributions(attention):
    q, k, v = data(T_q=5, T_k=7, batch=(2,))
    mask = np.tril(np.ones((5, 7), dtype=bool), 2)
    _, w = attention.attention(q, k, v, mask)
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-12)
    assert np.all(w[..., ~mask] == 0)  # a forbidden key gets exactly 0


def test_invariant_output_keeps_the_input_dtype(attention):
    q, k, v = (a.astype(np.float32) for a in data())
    out, w = attention.attention(q, k, v)
    assert out.dtype == np.float32 and w.dtype == np.float32
    assert attention.causal_mask(4).dtype == bool


# -- metamorphic: change the input in a known way, the output changes in a known way -------------

def test_metamorphic_permuting_keys_and_values_together(attention):
    q, k, v = data(T_k=6)
    perm = np.array([3, 0, 5, 1, 4, 2])
    out, _ = attention.attention(q, k, v)
    q2, k2, v2 = data(T_k=6)
    out_p, _ = attention.attention(q2, k2[perm], v2[perm])
    np.testing.assert_allclose(out_p, out, atol=1e-12)


def test_metamorphic_adding_a_constant_to_every_score_changes_nothing(attention):
    # q · (k + c·u) = q · k + c (q · u): the same for every key of a row, so softmax ignores it
    q, k, v = data(T_q=1, T_k=5)
    shifted = k + 4.0 * q / (q @ q.T)  # every score of the single query grows by 4
    out, _ = attention.attention(q, k, v)
    out_s, _ = attention.attention(q, shifted, v)
    np.testing.assert_allclose(out_s, out, atol=1e-9)


# -- perturbation: what must not matter, does not ------------------------------------------------

def test_perturbation_the_future_does_not_leak(attention):
    q, k, v = data(T_q=6, T_k=6)
    causal = np.tril(np.ones((6, 6), dtype=bool))
    out, _ = attention.attention(q, k, v, causal.copy())
    k2, v2 = k.copy(), v.copy()
    k2[4:], v2[4:] = 100.0, -100.0  # rewrite tokens 4 and 5
    out2, _ = attention.attention(q, k2, v2, causal.copy())
    np.testing.assert_array_equal(out2[:4], out[:4])  # queries 0..3 never see them


# -- special input: the rows, magnitudes and shapes that break naive code ------------------------

def test_special_input_a_row_with_no_allowed_key_is_zero(attention):
    q, k, v = data()
    mask = np.tril(np.ones((4, 4), dtype=bool))
    mask[1] = False  # query 1 may look at nothing
    out, w = attention.attention(q, k, v, mask)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    np.testing.assert_array_equal(w[1], 0.0)
    np.testing.assert_array_equal(out[1], 0.0)


def test_special_input_softmax_of_large_and_small_rows(attention):
    x = np.array([[1000.0, 1001.0, 999.0], [0.0, 1.0, -1.0]])  # rows far apart in size
    want = np.exp([0.0, 1.0, -1.0]) / np.exp([0.0, 1.0, -1.0]).sum()
    np.testing.assert_allclose(attention.softmax(x), [want, want], atol=1e-12)


# -- side effect: the call leaves its inputs as they were ----------------------------------------

def test_side_effect_inputs_are_not_modified(attention):
    q, k, v = data()
    x = np.array([[1.0, 2.0, 3.0]])
    mask = np.tril(np.ones((4, 4), dtype=bool))
    attention.attention(q, k, v, mask)
    attention.softmax(x)
    for got, want in zip((q, k, v), data()):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, [[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), dtype=bool)))
