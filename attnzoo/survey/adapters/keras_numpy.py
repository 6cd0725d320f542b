"""keras.ops.dot_product_attention, KERAS_BACKEND=numpy.

Converts: torch tensors to NumPy arrays and the answer back (values and dtype unchanged); a
bool mask to ``mask`` (True =
attend, as SDPA), a float mask to ``bias``, each broadcast to rank 4 by adding size-1 axes;
``flash_attention=False`` (the CPU path). Grouped heads are keras' own. Keras' (N, L, H, E)
layout is declared (``layout=BLHE``): the harness transposes, not the adapter.

Empty rows: ``uniform``. The page says the mask is "used to filter out logits"; the numpy
backend (``_apply_masks`` in ``keras/src/backend/numpy/nn.py``) replaces a masked logit with
``-0.7 ×`` the dtype's largest value, so a query every key is masked from gets weight 1/S on each
key and the mean of the values (checked on keras 3.15.1). A float mask of −∞ is a bias, and
such a row is NaN, which no convention allows.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _keras, _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="keras-numpy", title="keras.ops.dot_product_attention (numpy backend)",
    distribution="keras", module="keras",
    unsupported=frozenset({"rank_other_than_4", "dropout", "autograd", "layout=BLHE",
                           "float64=returned-as-float32"}),
    refuses=("takes no dropout",),
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
    empty_rows="uniform",  # a mask is a large negative fill (the docstring above)
    empty_rows_docs="https://github.com/keras-team/keras/blob/master/keras/src/backend/numpy/nn.py",
    float64_docs="https://github.com/keras-team/keras/blob/master/keras/src/backend/common/dtypes.py",
)


# the survey's root causes read against Keras' documentation (attnzoo.survey.findings)
_ADDITIVE = Review(
    "float32", ("no_allowed_key", "float_mask"), "divergence",
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
    says="mask filters out logits, and an additive mask is to be passed as bias instead.",
    note="The additive form (0 / -inf) of a row that masks every key gives NaN, where the "
         "bool form gives the mean of the values (checked on keras 3.15.1).")
_GQA = Review(
    "float32", ("gqa",), "divergence",
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
    says="grouped query attention is performed when the query heads N are a multiple of the "
         "key heads K.",
    note="The numpy backend raises ValueError (operands could not be broadcast) on any K < N "
         "but 1; the torch backend computes it (checked on keras 3.15.1).",
    issue="https://github.com/keras-team/keras/pull/23081")
FINDINGS = (
    _ADDITIVE, replace(_ADDITIVE, dtype="float64"),
    replace(_ADDITIVE, features=("no_allowed_key", "per_head_mask")),
    replace(_ADDITIVE, dtype="float64", features=("no_allowed_key", "per_head_mask")),
    _GQA, replace(_GQA, dtype="float64"),
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import numpy as np

    from attnzoo.survey.adapters import _convert

    out = _keras.attend("numpy", query, key, value, attn_mask, dropout_p, is_causal, scale,
                        _convert.to_numpy)
    return _convert.to_torch(np.asarray(out), query)  # (N, L, H, Ev), as declared


__getattr__ = _lazy.loader(DECLARATION, _sdpa, before=lambda: _keras.ops("numpy"))
