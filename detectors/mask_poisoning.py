"""What no query may see cannot matter: huge values in forbidden keys and values change nothing.

A poisoning oracle. Padding positions carry whatever the embedding of a pad token is — in real
batches, garbage. Keys that every query is forbidden from are set to enormous finite values
(their values too): a mask applied with −∞ ignores them, a large negative fill (−1e9 added to
a score of 1e12) or a mask applied to the weights after the fact lets them through. Under a
declared ``uniform`` convention a row with no allowed key reads every key, so no key of its
batch item and head is dead (detectors.kit.conventions).
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import dead_keys
from detectors.kit.needs import ATTENTION

PROPERTY = "Setting keys and values that no query may attend to huge finite values changes nothing."
CLAUSES = ("C3", "S1")
ORACLE = "perturbation"
POISON = {"float64": 1e12, "float32": 1e12, "bfloat16": 1e12, "float16": 512.0}
VALUE_POISON = {"float64": 1e12, "float32": 1e12, "bfloat16": 1e12, "float16": 3e4}
NEEDS = ATTENTION


def last_key_forbidden(call):
    """The call with its last key forbidden to every query, so there is a key to poison."""
    if call.mask is not None:
        mask = np.array(call.mask, copy=True)
        mask[..., -1] = False
        return call.with_(mask=mask, name=call.name + " (last key masked)")
    bias = np.array(call.bias, copy=True)
    bias[..., -1] = -np.inf
    return call.with_(bias=bias, name=call.name + " (last key masked)")


def dead(subject, call):
    """The keys no row reads under the declared convention, shaped like K's (..., S)."""
    return dead_keys(call, subject.target.causal_alignment, subject.seen(call))


def check(subject, battery):
    masked = [c for c in subject.cases(battery) if c.mask is not None or c.bias is not None]
    cases = [c for c in masked if dead(subject, c).any()]
    cases += [last_key_forbidden(c) for c in masked if not c.causal and
              (c.mask if c.mask is not None else c.bias).shape[-1] == c.k.shape[-2]]
    for call in cases:
        with subject.trial(call):
            unread = dead(subject, call)  # (..., S) shaped like K's leading dims
            if not unread.any():
                continue
            base, atol = subject.baseline(call)
            k, v = call.k.copy(), call.v.copy()
            signs = np.where(np.arange(k.shape[-1]) % 2 == 0, 1.0, -1.0)  # some scores up, some down
            k[unread] = POISON[subject.dtype] * signs
            v[unread] = VALUE_POISON[subject.dtype]
            poisoned = subject.attend(call.with_(k=k, v=v))
            with subject.case(call.name, base, poisoned,
                              relation="keys and values no query may see were set to huge values"):
                expect.agree(base.out, poisoned.out, atol,
                             names=("f(x)", "f(x, forbidden keys poisoned)"))
