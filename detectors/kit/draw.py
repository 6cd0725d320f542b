"""Seeded inputs: values on the 1/8 grid, masks of each kind, float biases, softmax scores,
and the lines a reproduction writes to draw each of them again from the same generator."""

import math

import numpy as np

from detectors.kit.provenance import grid_draw, trace

GRID = 8  # inputs are multiples of 1/GRID
LEFT_PADS = (130, 64, 0, 200, 128)  # masked prefixes of "left-padding" masks, item by item


def grid(rng, shape, scale=1.0):
    """Normal draws rounded to the 1/8 grid (times a power-of-two scale); traced, so that a
    reproduction can redraw them from the generator's seed."""
    out = untraced_grid(rng, shape, scale)
    trace(rng, out, grid_draw(shape, scale))
    return out


def untraced_grid(rng, shape, scale=1.0):
    """:func:`grid` untraced, for the battery's own draws (remembered by their stream)."""
    return np.round(rng.standard_normal(shape) * GRID) / GRID * scale


def per_head(logits):
    """The factor that gives each head (axis -3) its own sharpness: 1 when none is asked."""
    return np.asarray(logits, dtype=float)[:, None, None] if logits else 1.0


def head_draw(logits):
    """The line of :func:`per_head`, after the grid's."""
    if not logits:
        return ()
    return (f"{{x}} = {{x}} * np.array({tuple(map(float, logits))!r})[:, None, None]",)


def shared(a):
    """``a`` with its first (…, L, S) or (…, S, E) slab repeated along every leading axis: the
    same keys, values or mask for every item and head."""
    return None if a is None else np.broadcast_to(a[(slice(0, 1),) * (a.ndim - 2)],
                                                  a.shape).copy()


def shared_draw(a):
    """The line of :func:`shared`, after the array's own."""
    if a is None or a.ndim <= 2:
        return ()
    return (f"{{x}} = np.broadcast_to({{x}}[{', '.join([':1'] * (a.ndim - 2))}], "
            f"{a.shape}).copy()",)


def softmax_input(shape, rng):
    """Scores with a few -inf entries, never a whole row of them."""
    x = untraced_grid(rng, shape, 2.0)
    if len(shape) > 1:
        holes = rng.random(shape) < 0.25
        holes[..., 0] = False
        x[holes] = -math.inf
    return x


def softmax_draw(shape):
    """The lines of :func:`softmax_input`, for a reproduction."""
    lines = grid_draw(shape, 2.0)
    if len(shape) > 1:
        lines += (f"_holes = {{rng}}.random({tuple(shape)}) < 0.25", "_holes[..., 0] = False",
                  "{x}[_holes] = -np.inf")
    return lines


def mask_draw(kind, shape, pads=None):
    """The lines that make :func:`draw_mask`'s mask, before its per-row fix-ups (a reproduction
    writes those as edits)."""
    shape = tuple(shape)
    L, S = (shape[-2] if len(shape) > 1 else 1), shape[-1]
    if kind == "causal":
        return (f"{{x}} = np.tril(np.ones(({L}, {S}), dtype=bool)).reshape({shape})",)
    if kind in ("key-padding", "left-padding"):
        ends = key_lengths(shape) if kind == "key-padding" else left_pads(shape, pads)
        op = "<" if kind == "key-padding" else ">="
        return (f"{{x}} = (np.arange({S}) {op} np.array({ends.tolist()})[:, None])"
                f".reshape({shape})",)
    return (f"{{x}} = {{rng}}.random({shape}) < 0.65",)


def key_lengths(shape):
    return np.linspace(2, shape[-1], num=shape[0]).round().astype(int)  # (B,)


def left_pads(shape, pads=None):
    return np.minimum(np.resize(pads or LEFT_PADS, shape[0]), shape[-1] - 1)  # (B,), a key kept


def draw_mask(kind, shape, rng, pads=None):
    """A keep-convention bool mask: True = may attend. A (S,) shape is one row for every query."""
    L, S = (shape[-2] if len(shape) > 1 else 1), shape[-1]
    if kind == "causal":
        return np.tril(np.ones((L, S), dtype=bool)).reshape(shape)
    if kind == "key-padding":  # each item keeps a different prefix of its keys
        lengths = key_lengths(shape)
        keep = np.arange(S)[None, :] < lengths[:, None]  # (B, S)
        return keep.reshape(shape[:1] + (1,) * (len(shape) - 2) + (S,))
    if kind == "left-padding":  # item b masks its first PADS[b] keys: whole tiles of 64, 128
        pads = left_pads(shape, pads)
        keep = np.arange(S)[None, :] >= pads[:, None]  # (B, S)
        return keep.reshape(shape[:1] + (1,) * (len(shape) - 2) + (S,))
    keep = rng.random(shape) < 0.65
    rows = keep.reshape(-1, L, S)
    for n, i in np.argwhere(~rows.any(axis=-1)):  # every row keeps a key unless asked otherwise
        rows[n, i, rng.integers(S)] = True
    if kind == "empty-rows":  # row 1 of the first matrix and one key column see nothing
        rows[0, 1, :] = False
        rows[:, :, S - 2] = False
        for m in rows[1:]:
            m[0, :] = False
    return rows.reshape(shape)


def draw_bias(kind, shape, rng):
    """A float mask: a finite bias with some -inf entries."""
    bias = untraced_grid(rng, shape)
    forbid = rng.random(shape) < 0.3
    bias[forbid] = -math.inf
    flat = bias.reshape(-1, shape[-2], shape[-1])
    flat[np.isneginf(flat).all(axis=-1), 0] = 0.0  # keep one finite entry per row
    if kind == "empty-rows":
        flat[0, 1, :] = -math.inf
    return bias


def bias_draw(shape):
    """The lines of :func:`draw_bias` before its per-row fix-ups (written as edits)."""
    return grid_draw(shape) + (f"{{x}}[{{rng}}.random({tuple(shape)}) < 0.3] = -np.inf",)
