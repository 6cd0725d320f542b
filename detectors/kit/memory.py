"""How an argument lies in memory: the same values, in the layouts a model hands a kernel.

A tensor reaching attention in a model is seldom a fresh contiguous block: after a head split
it is a transposed view; a slice of a packed QKV projection or of a wider cache starts at a
storage offset; a key/value prefix shared by a batch, the heads of multi-query attention, or a
mask built (1, 1, L, S) and expanded to (B, H, L, S) have stride 0 along the axes the values do
not change on. The values are the same whatever the layout; code that reads raw memory as if
it were one contiguous block from offset 0 is not. One function lays out a tensor (inputs and
upstream gradients alike, where the implementation runs) and a small twin lays out a NumPy
array; both take a contiguous argument and keep its values.
"""

import numpy as np

# Request.layout and Request.grad_layout: one block in row-major order; made as (..., L, H, E)
# and transposed back, as after splitting heads (the last two axes of a 2-D array); a slice
# [..., 1:] of a buffer one column wider (a nonzero storage offset); one copy along every axis
# the values are constant on, expanded with stride 0
LAYOUTS = ("contiguous", "transposed", "offset", "expanded")


def laid_out(t, layout):
    """The contiguous tensor ``t`` with the same values laid out as ``layout`` says."""
    if layout == "transposed" and t.dim() >= 2:
        axes = (-3, -2) if t.dim() >= 3 else (-2, -1)
        return t.transpose(*axes).contiguous().transpose(*axes)
    if layout == "expanded":
        small = t
        for axis in range(t.dim()):
            if small.shape[axis] > 1 and bool((small == small.narrow(axis, 0, 1)).all()):
                small = small.narrow(axis, 0, 1)
        return small.contiguous().expand(t.shape)
    if layout == "offset" and t.dim() >= 1:
        wide = t.new_zeros(t.shape[:-1] + (t.shape[-1] + 1,))
        wide[..., 1:] = t
        return wide[..., 1:]
    return t


def constant_axes(a):
    """The axes of size > 1 along which the array's values do not change (what "expanded"
    gives stride 0)."""
    small, axes = a, []
    for axis in range(a.ndim):
        first = small.take([0], axis=axis)
        if small.shape[axis] > 1 and bool((small == first).all()):
            small, axes = first, axes + [axis]
    return tuple(axes)


def laid_out_array(a, layout):
    """:func:`laid_out` for a NumPy array: an expanded one is read-only, as ``broadcast_to``
    makes it."""
    if layout == "transposed" and a.ndim >= 2:
        axes = (-3, -2) if a.ndim >= 3 else (-2, -1)
        return np.ascontiguousarray(a.swapaxes(*axes)).swapaxes(*axes)
    axes = constant_axes(a) if layout == "expanded" else ()
    if axes:
        small = a[tuple(slice(0, 1) if i in axes else slice(None) for i in range(a.ndim))]
        return np.broadcast_to(np.ascontiguousarray(small), a.shape)
    if layout == "offset" and a.ndim >= 1:
        wide = np.zeros(a.shape[:-1] + (a.shape[-1] + 1,), dtype=a.dtype)
        wide[..., 1:] = a
        return wide[..., 1:]
    return a
