"""The lessons' small examples as calls either contract can make.

A lesson module takes (L, E) arrays; an SDPA-style callable takes (N, H, L, E), so the same
example gains a (1, 1) in front for it, and the answer loses it again.
"""

from detectors.kit import lessons
from detectors.kit.battery import Call
from detectors.kit.specs import Spec


def example(name, q, mask, subject):
    """A lesson example as a call the subject's contract can make: (3, 2), or (1, 1, 3, 2)."""
    k, v = lessons.K, lessons.V
    if subject.heads_axis:
        q, k, v = (a[None, None] for a in (q, k, v))
        mask = None if mask is None else mask[None, None]
    spec = Spec(name, q.shape, k.shape, v.shape, mask=None if mask is None else "given",
                mask_shape=None if mask is None else mask.shape)
    return Call(spec, q, k, v, mask, name=name)


def unbatched(a, shape):
    """Drop the (1, 1) an SDPA call adds, and nothing else."""
    while a.ndim > len(shape) and a.shape[0] == 1:
        a = a[0]
    return a


def as_call(subject, q, k, v, mask=None, name="lesson check"):
    if subject.heads_axis:
        q, k, v = (a[None, None] for a in (q, k, v))
        mask = None if mask is None else mask[None, None]
    return Call(Spec(name, q.shape, k.shape, v.shape), q, k, v, mask, name=name)
