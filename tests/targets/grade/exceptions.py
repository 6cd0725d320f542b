"""Exceptions through the proxy (for tests/test_grade_proxy.py)."""
import numpy as np
import pytest


def test_value_error_of_a_negative_size(attention):
    with pytest.raises(ValueError):
        attention.causal_mask(-1)


def test_shape_mismatch_is_a_value_error(attention):
    with pytest.raises(ValueError):
        attention.attention(np.ones((3, 2)), np.ones((3, 4)), np.ones((3, 2)), None)


def test_an_object_cannot_travel(attention):
    with pytest.raises(TypeError):
        attention.softmax(object())


def test_an_unexpected_error_is_reported_as_its_type(attention):
    attention.causal_mask(-1)
