def test_wrong_expectation(attention):
    assert attention.causal_mask(2).sum() == 4  # a causal mask of 2 has 3 allowed pairs


def test_fine(attention):
    assert attention.causal_mask(2).shape == (2, 2)
