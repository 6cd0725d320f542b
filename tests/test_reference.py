"""The reference reproduces the lessons' numbers and agrees with PyTorch and the loop oracle."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from detectors.kit import lessons
from reference import lesson_numpy, lesson_torch, loop_oracle
from reference.sdpa import scaled_dot_product_attention as sdpa


def test_lesson_numbers_round_to_what_the_lessons_print():
    assert np.round(lessons.SOFTMAX_EXACT, 3).tolist() == lessons.SOFTMAX_PRINTED
    assert np.allclose(np.round(lessons.WEIGHTS000_EXACT, 2), lessons.WEIGHTS000_PRINTED)
    assert np.allclose(np.round(lessons.OUT000_EXACT, 2), lessons.OUT000_PRINTED)
    assert np.allclose(np.round(lessons.WEIGHTS003_EXACT, 3), lessons.WEIGHTS003_PRINTED)
    assert np.allclose(np.round(lessons.OUT003_EXACT, 3), lessons.OUT003_PRINTED)
    assert np.allclose(np.round(lessons.UNMASKED003_ROW0_EXACT, 3),
                       lessons.UNMASKED003_ROW0_PRINTED)


@pytest.mark.parametrize("lesson", [lesson_numpy, lesson_torch], ids=["numpy", "torch"])
def test_seed_003_example(lesson):
    as_array = np.asarray if lesson is lesson_numpy else torch.tensor
    Q, K, V = (as_array(a) for a in (lessons.Q003, lessons.K, lessons.V))
    out, weights = lesson.attention(Q, K, V, lesson.causal_mask(3))
    # the lesson prints A = [[1, 0, 0], [0.196, 0.804, 0], [0.248, 0.248, 0.503]]
    assert np.round(np.asarray(weights), 3).tolist() == [[1, 0, 0], [0.196, 0.804, 0],
                                                          [0.248, 0.248, 0.503]]
    # and Y = [[10, 0], [1.956, 8.044], [5, 5]]
    assert np.round(np.asarray(out), 3).tolist() == [[10, 0], [1.956, 8.044], [5, 5]]


@pytest.mark.parametrize("lesson", [lesson_numpy, lesson_torch], ids=["numpy", "torch"])
def test_seed_000_example(lesson):
    as_array = np.asarray if lesson is lesson_numpy else torch.tensor
    Q, K, V = (as_array(a) for a in (lessons.Q000, lessons.K, lessons.V))
    out, weights = lesson.attention(Q, K, V)
    # «кошка=0.40, пьёт=0.20, молоко=0.40 … выход -> [6.02, 3.98]»
    assert np.round(np.asarray(weights), 2).tolist() == [[0.4, 0.2, 0.4], [0.2, 0.4, 0.4],
                                                          [0.25, 0.25, 0.5]]
    assert np.round(np.asarray(out), 2).tolist() == [[6.02, 3.98], [3.98, 6.02], [5.0, 5.0]]


def test_softmax_of_the_seed_000_logits():
    assert np.round(lesson_numpy.softmax(np.array([2.0, 1.0, 0.1])), 3).tolist() == \
        [0.659, 0.242, 0.099]


def test_a_fully_masked_row_is_zero_not_nan():
    q, k, v = np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 5))
    mask = np.array([[True, False, False, False], [False] * 4])
    out, weights = lesson_numpy.attention(q, k, v, mask)
    assert weights[1].tolist() == [0.0] * 4 and out[1].tolist() == [0.0] * 5
    assert weights[0].tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_output_dtype_follows_input(dtype):
    x = np.ones((2, 3), dtype=dtype)
    out, weights = lesson_numpy.attention(x, x, x, lesson_numpy.causal_mask(2))
    assert out.dtype == dtype and weights.dtype == dtype


def _random(shape, seed):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape))


@pytest.mark.parametrize("case", ["causal", "masked", "per-head", "float-mask", "scale", "gqa"])
def test_torch_reference_agrees_with_pytorch_to_1e_12(case):
    q, k, v = _random((2, 3, 4, 5), 0), _random((2, 3, 6, 5), 1), _random((2, 3, 6, 7), 2)
    kwargs = {}
    if case == "causal":
        kwargs = dict(is_causal=True)
    elif case == "masked":
        kwargs = dict(attn_mask=_random((4, 6), 3) > 0)
    elif case == "per-head":
        kwargs = dict(attn_mask=_random((2, 3, 4, 6), 4) > -0.5)
    elif case == "float-mask":
        kwargs = dict(attn_mask=_random((2, 1, 4, 6), 5))
    elif case == "scale":
        kwargs = dict(scale=0.3)
    else:
        q, kwargs = _random((2, 6, 4, 5), 6), dict(enable_gqa=True)
    ours, theirs = sdpa(q, k, v, **kwargs), F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert (ours - theirs).abs().max().item() <= 1e-12


def test_lesson_torch_matches_pytorch_causal_and_masked():
    q, k, v = _random((2, 4, 8), 7), _random((2, 4, 8), 8), _random((2, 4, 8), 9)
    out, _ = lesson_torch.attention(q, k, v, lesson_torch.causal_mask(4))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (out - ref).abs().max().item() <= 1e-12
    mask = _random((2, 1, 4), 10) > 0
    mask[..., 0] = True
    out, _ = lesson_torch.attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (out - ref).abs().max().item() <= 1e-12


def test_loop_oracle_is_independent_and_agrees():
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), \
        rng.standard_normal((2, 5, 6))
    mask = rng.random((2, 3, 5)) > 0.3
    mask[..., 0] = True
    out, weights = loop_oracle.attend(q, k, v, mask=mask)
    ref_out, ref_weights = lesson_numpy.attention(q, k, v, mask)
    assert np.abs(out - ref_out).max() <= 1e-12 and np.abs(weights - ref_weights).max() <= 1e-12


def test_loop_oracle_causal_alignments():
    L, S = 2, 4
    top = [[loop_oracle.causal_allowed(i, j, L, S, "top-left") for j in range(S)] for i in range(L)]
    bottom = [[loop_oracle.causal_allowed(i, j, L, S, "bottom-right") for j in range(S)]
              for i in range(L)]
    assert top == [[True, False, False, False], [True, True, False, False]]
    assert bottom == [[True, True, True, False], [True, True, True, True]]
    with pytest.raises(ValueError, match="alignment"):
        loop_oracle.causal_allowed(0, 0, 1, 1, "diagonal")


def test_scale_is_one_over_sqrt_dk():
    # seed 003: «делим на √2 ≈ 1.414» — the scores of the worked example
    scores = lessons.Q003 @ lessons.K.T / math.sqrt(2)
    assert np.round(scores, 2).tolist() == [[1.41, 0, 1.41], [0, 1.41, 1.41], [0.71, 0.71, 1.41]]


def test_scores_are_scaled_before_the_product_so_float16_does_not_overflow():
    """Raw |q·k| past 65504 is inf in float16 unless the scale comes first (torch's doesn't)."""
    rng = np.random.default_rng(0)
    q, k, v = (torch.tensor(np.round(rng.standard_normal((1, 2, 16, 64)) * 8) * 8)
               for _ in range(3))  # entries ~ N(0, 64²), exact in float16
    scale = 2.0 ** -15  # scaled scores ~ N(0, 1): moderate
    raw = (q @ k.transpose(-2, -1)).abs().max()
    assert raw > 65504
    q16, k16, v16 = (a.half() for a in (q, k, v))
    old = torch.softmax(q16 @ k16.transpose(-2, -1) * scale, -1) @ v16  # the product first
    assert old.isnan().any()  # inf - inf in the softmax
    new = sdpa(q16, k16, v16, scale=scale)
    want = F.scaled_dot_product_attention(q, k, v, scale=scale)  # float64
    assert torch.isfinite(new).all()
    assert torch.allclose(new.double(), want, atol=0.05)
    assert torch.isfinite(F.scaled_dot_product_attention(q16, k16, v16, scale=scale)).all()
