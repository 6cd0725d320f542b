"""The lesson's softmax maps a row that is entirely −∞ to a row of zeros, never to NaN.

A special input for the softmax itself (C2, C5). Attention is asked about fully masked rows
elsewhere (:mod:`empty_rows_are_zero`), but a module can guard its attention — zeroing the rows
a padding mask closes after the softmax — while the softmax it exports still computes
−∞ − (−∞) = NaN, as ``torch.softmax`` does. Whoever reuses that softmax (a masked pooling, a
sparse router) inherits the NaN. Rows that keep a finite score must come out as before.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import SoftmaxCall
from detectors.kit.needs import SOFTMAX

PROPERTY = "softmax of a row of −∞ is a row of zeros (never NaN); every other row is unchanged."
CLAUSES = ("C2", "C5")
ORACLE = "special-input"
NEEDS = SOFTMAX


def emptied(call):
    """The call's scores with the first and the last row set wholly to −∞."""
    x = call.x.copy()
    if x.ndim == 1:
        x[:] = -np.inf  # (n,): the one row
    else:
        rows = x.reshape(-1, x.shape[-1])  # (rows, n), a view of x
        rows[0] = rows[-1] = -np.inf
    return SoftmaxCall(x, f"{call.name} (rows of -inf)")


def check(subject, battery):
    for call in [emptied(c) for c in battery.softmax]:
        with subject.trial(call):
            answer = subject.softmax(call.x)
            want = subject.expected(call)  # (..., n): zeros in the emptied rows
            with subject.case(call.name, answer):
                expect.finite(answer.out, "softmax")
                expect.close(answer.out, want, subject.allowance(call, want), "softmax")
