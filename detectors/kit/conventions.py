"""What a query row with no allowed key gives: the empty-row convention a target declares.

``zero`` (clause C5, PyTorch's since 2.5, the default): zero weights and a zero output row.
``uniform`` (a mask applied as a large negative fill, as ``jax.nn.dot_product_attention`` and
``keras.ops.dot_product_attention`` apply it): weight 1/S on each of the S keys of the row,
and the mean of the values over all keys as its output — of the key/value head the query head
reads, under GQA. A row is empty when the call forbids it every key (False mask entries, -inf
biases, is_causal); NaN is no convention. The oracle (``Judge.expected``) gives the declared
rows; the keys a row reads (:func:`seen`) and the reference's gradients (:func:`gradients`)
follow the declaration too, so every detector judges it. The lesson's ``softmax`` is no
attention row: a row of -inf is clause C2's, zeros, whatever the convention.

The exact derivative of a uniform row: its weights do not depend on the scores, so it adds
nothing to the gradients of the query, the keys or a float mask, and G_i / S (its upstream
gradient row over S) to the gradient of every value it reads. Under the default every function
here returns what it is given.
"""

import functools

import numpy as np

from detectors.kit.allowed import allowed, empty_rows

DEFAULT = "zero"


def declared(target, manifest=None):
    """The convention ``target`` is judged by: the one its options (or a survey adapter)
    declare, else ``ATTNZOO_EMPTY_ROWS`` beside the callable (the manifest's), else zero."""
    given = getattr(target, "empty_rows", DEFAULT)
    if given != DEFAULT:
        return given
    return getattr(manifest, "empty_rows", None) or DEFAULT


@functools.lru_cache(maxsize=1024)
def rows(call, alignment):
    """Bool (..., L): the call's rows with no allowed key (computed once per call)."""
    return empty_rows(call, alignment)


def mean_values(call):
    """(..., H, 1, Ev): the mean of the values over all S keys, for each query head."""
    v = np.asarray(call.v, dtype=np.float64)
    if call.gqa:  # query head h reads key/value head h // g
        v = np.repeat(v, call.q.shape[-3] // call.k.shape[-3], axis=-3)
    return v.mean(axis=-2, keepdims=True)


def expected(call, want, alignment, convention):
    """The oracle's (out, weights) for ``call`` with its empty rows as ``convention`` has them."""
    if convention == DEFAULT:
        return want
    empty = rows(call, alignment)[..., None]  # (..., L, 1)
    if not empty.any():
        return want
    out, weights = want
    return (np.where(empty, mean_values(call), out),
            np.where(empty, 1.0 / call.k.shape[-2], weights))


def seen(call, alignment, convention):
    """Bool (..., L, S): the keys each row reads: the allowed ones, and under ``uniform`` every
    key of a row with none allowed."""
    keep = allowed(call, alignment)
    if convention == DEFAULT:
        return keep
    return keep | rows(call, alignment)[..., None]


def gradients(call, grads, upstream, alignment, convention):
    """The reference's gradients of sum(out * upstream) (a dict by input name, the reference
    giving empty rows zeros) for a target that declared ``convention``: under ``uniform`` each
    empty row adds upstream_i / S to the gradient of every value it reads."""
    value = "V" if "V" in (grads or {}) else "value"
    if convention == DEFAULT or not grads or grads.get(value) is None:
        return grads
    empty = rows(call, alignment)
    if not empty.any():
        return grads
    g = np.asarray(upstream, dtype=np.float64)  # (..., H, L, Ev), shaped like the output
    share = np.where(empty[..., None], g, 0.0).sum(axis=-2) / call.k.shape[-2]  # (..., H, Ev)
    if call.gqa:  # the g query heads of a group read one key/value head
        group = call.q.shape[-3] // call.k.shape[-3]
        share = share.reshape(share.shape[:-2] + (-1, group, share.shape[-1])).sum(axis=-2)
    S = call.v.shape[-2]
    full = np.broadcast_to(share[..., None, :], share.shape[:-1] + (S, share.shape[-1]))
    return {**grads, value: grads[value] + summed_to(full, call.v.shape)}


def summed_to(a, shape):
    """``a`` summed over the axes along which an array of ``shape`` was broadcast to it."""
    extra = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(extra))) if extra > 0 else a
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a
