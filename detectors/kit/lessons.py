"""The lessons' worked examples, as data: inputs, the numbers the lessons print, exact values.

Seed 000 («Расчёт весов внимания»): three tokens, Q = K, no mask; seed 003 («Считаем руками»):
Q = 2·I-ish, the same K and V, with and without the causal mask. ``printed`` is what the lesson
shows (rounded as it rounds); ``exact`` is the closed form the detector compares against.
"""

import math

import numpy as np

E = math.exp
R2 = math.sqrt(2.0)

SOFTMAX_X = np.array([2.0, 1.0, 0.1])
SOFTMAX_PRINTED = [0.659, 0.242, 0.099]
SOFTMAX_EXACT = np.array([E(2.0), E(1.0), E(0.1)]) / (E(2.0) + E(1.0) + E(0.1))

K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])


def _softmax(scores):
    e = np.array([E(s) for s in scores])
    return e / e.sum()


# seed 000: Q = K; scores = Q Kᵀ / √2
Q000 = K.copy()
WEIGHTS000_PRINTED = [[0.40, 0.20, 0.40], [0.20, 0.40, 0.40], [0.25, 0.25, 0.50]]
OUT000_PRINTED = [[6.02, 3.98], [3.98, 6.02], [5.00, 5.00]]
WEIGHTS000_EXACT = np.array([
    _softmax([1 / R2, 0.0, 1 / R2]),
    _softmax([0.0, 1 / R2, 1 / R2]),
    _softmax([1 / R2, 1 / R2, 2 / R2]),
])
OUT000_EXACT = WEIGHTS000_EXACT @ V

# seed 003: Q = [[2, 0], [0, 2], [1, 1]]; scores / √2 ≈ [[1.41, 0, 1.41], [0, 1.41, 1.41], [.71, .71, 1.41]]
Q003 = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
MASK003 = np.array([[True, False, False], [True, True, False], [True, True, True]])
WEIGHTS003_PRINTED = [[1, 0, 0], [0.196, 0.804, 0], [0.248, 0.248, 0.503]]
OUT003_PRINTED = [[10, 0], [1.956, 8.044], [5, 5]]
WEIGHTS003_EXACT = np.array([
    [1.0, 0.0, 0.0],
    list(_softmax([0.0, R2])) + [0.0],
    _softmax([1 / R2, 1 / R2, R2]),
])
OUT003_EXACT = WEIGHTS003_EXACT @ V
UNMASKED003_ROW0_PRINTED = [0.446, 0.108, 0.446]
UNMASKED003_ROW0_EXACT = _softmax([R2, 0.0, R2])
