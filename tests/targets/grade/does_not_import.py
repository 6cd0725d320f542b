import numpy_but_misspelled  # noqa: F401


def test_never(attention):
    pass
