"""The lesson's seven tests (seed 003, «Практика»), as plain pytest.

«Тесты проверят пример из урока, масштаб 1/√d_k, причинность, совпадение с эталоном-циклом и
работу на батче»: the worked example (the mask, the weights, the output), the 1/√d_k scale,
causality, agreement with a loop reference, and a batch. Each test takes the implementation under
test as the fixture ``attention`` — an object with the lesson's four functions — which
``attnzoo grade`` injects: the reference, every decoy and every zoo bug in turn.

    attnzoo grade docs/lesson-tests/lesson_tests.py

The shapes are the lesson's: T = 4, d_k = d_v = 8, B = 2, d_model = 16 (its PyTorch listing).
The inputs are multiples of 1/8, so they are exact in every float format.
"""

import math

import numpy as np

WEIGHTS_PRINTED = [[1, 0, 0], [0.196, 0.804, 0], [0.248, 0.248, 0.503]]
OUT_PRINTED = [[10, 0], [1.956, 8.044], [5, 5]]
CAUSAL = np.tril(np.ones((4, 4), dtype=bool))  # (4, 4)


def example():
    """The worked example, new arrays each time: three tokens, Q = [[2, 0], [0, 2], [1, 1]]."""
    Q = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])  # (3, 2)
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (3, 2)
    V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])  # (3, 2)
    mask = np.array([[True, False, False], [True, True, False], [True, True, True]])  # (3, 3)
    return Q, K, V, mask


def random_inputs():
    """q, k, v (4, 8); X (B, T, d_model) = (2, 4, 16); W_q, W_k, W_v (16, 8): new each time.

    A test that shares arrays with the next one lets an implementation that writes into its
    inputs change what the next test sees: every test makes its own.
    """
    rng = np.random.default_rng(0)
    q, k, v = (np.round(rng.standard_normal((4, 8)) * 8) / 8 for _ in range(3))
    X = np.round(rng.standard_normal((2, 4, 16)) * 8) / 8
    W = [np.round(rng.standard_normal((16, 8)) * 8) / 8 / 4 for _ in range(3)]
    return q, k, v, X, W


def formula(q, k, v, mask=None):
    """softmax(Q Kᵀ / √d_k) V, written as the lesson writes it."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (T_q, T_k)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v  # (T_q, d_v)


def loop(q, k, v, mask):
    """The loop reference: one query and one key at a time, forbidden keys skipped."""
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = [q[i] @ k[j] / math.sqrt(q.shape[1]) if mask[i, j] else -math.inf
             for j in range(k.shape[0])]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        out[i] = sum(wj * v[j] for j, wj in enumerate(w)) / sum(w)
    return out


def test_causal_mask_is_the_lessons(attention):
    *_, mask = example()
    assert np.array_equal(attention.causal_mask(3), mask)


def test_example_weights(attention):
    out, w = attention.attention(*example())
    assert w.shape == (3, 3)
    np.testing.assert_allclose(np.round(w, 3), WEIGHTS_PRINTED)


def test_example_output(attention):
    out, w = attention.attention(*example())
    assert out.shape == (3, 2)
    np.testing.assert_allclose(np.round(out, 3), OUT_PRINTED)


def test_scale_is_one_over_sqrt_dk(attention):
    q, k, v, *_ = random_inputs()
    out, _ = attention.attention(q, k, v)
    q, k, v, *_ = random_inputs()
    np.testing.assert_allclose(out, formula(q, k, v), atol=1e-6)


def test_matches_the_loop_reference(attention):
    q, k, v, *_ = random_inputs()
    out, _ = attention.attention(q, k, v, CAUSAL.copy())
    q, k, v, *_ = random_inputs()
    np.testing.assert_allclose(out, loop(q, k, v, CAUSAL), atol=1e-6)


def test_causality_zeros_above_the_diagonal(attention):
    q, k, v, *_ = random_inputs()
    _, w = attention.attention(q, k, v, CAUSAL.copy())
    assert w.shape == (4, 4)
    assert np.all(np.triu(w, 1) == 0)


def test_batch(attention):
    *_, X, (W_q, W_k, W_v) = random_inputs()
    out, _ = attention.causal_self_attention(X, W_q, W_k, W_v)
    *_, X, (W_q, W_k, W_v) = random_inputs()
    want = np.stack([formula(X[b] @ W_q, X[b] @ W_k, X[b] @ W_v, CAUSAL) for b in range(2)])
    assert out.shape == (2, 4, 8)
    np.testing.assert_allclose(out, want, atol=1e-6)
