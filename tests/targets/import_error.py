import numpy_that_does_not_exist  # noqa: F401


def attention(Q, K, V, mask=None):
    return Q, Q
