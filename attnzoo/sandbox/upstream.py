"""The upstream gradient in the memory layouts a backward pass meets in a model.

A backward pass is handed whatever tensor the layers after it produced: the gradient of a head
merge arrives transposed, that of ``out.sum()`` or of a mean over queries arrives expanded with
stride 0, that of a slice of a wider tensor with a storage offset. The values are the same
whatever the layout; a backward that reads raw memory as if it were one contiguous block is not.
Runs where the implementation lives (torch only, imported by :mod:`attnzoo.sandbox.probes`).
"""


def laid_out(t, layout):
    """The contiguous tensor ``t`` with the same values laid out as ``layout`` says
    (:data:`detectors.kit.calls.GRAD_LAYOUTS`)."""
    if layout == "transposed" and t.dim() >= 2:  # as (..., L, H, Ev) transposed back
        axes = (-3, -2) if t.dim() >= 3 else (-2, -1)
        return t.transpose(*axes).contiguous().transpose(*axes)
    if layout == "expanded":  # one copy along every axis the values are constant on, stride 0
        small = t
        for axis in range(t.dim()):
            if small.shape[axis] > 1 and bool((small == small.narrow(axis, 0, 1)).all()):
                small = small.narrow(axis, 0, 1)
        return small.contiguous().expand(t.shape)
    if layout == "offset" and t.dim() >= 1:  # [..., 1:] of a buffer one column wider
        wide = t.new_zeros(t.shape[:-1] + (t.shape[-1] + 1,))
        wide[..., 1:] = t
        return wide[..., 1:]
    return t
