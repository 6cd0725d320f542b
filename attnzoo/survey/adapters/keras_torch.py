"""keras.ops.dot_product_attention, KERAS_BACKEND=torch.

Converts: a bool mask to ``mask`` (True = attend, as SDPA), a float mask to ``bias``, each
broadcast to rank 4 by adding size-1 axes; ``flash_attention=False``. Tensors stay torch
tensors (keras' torch backend takes them as they are). Grouped heads are keras' own. Keras'
(N, L, H, E) layout is declared (``layout=BLHE``): the harness transposes, not the adapter.

Empty rows: ``uniform``. The torch backend (``dot_product_attention`` in
``keras/src/backend/torch/nn.py``) turns a bool mask into the float mask
``torch.where(mask, 0, large_negative)`` for torch's SDPA, so a query every key is masked from
gets weight 1/S on each key and the mean of the values (checked on keras 3.15.1). A float mask
goes to torch's SDPA as it is, and a row of −∞ there is torch's zeros: the two mask forms
disagree, which the detectors report.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _keras, _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="keras-torch", title="keras.ops.dot_product_attention (torch backend)",
    distribution="keras", module="keras",
    unsupported=frozenset({"rank_other_than_4", "dropout", "layout=BLHE",
                           "float64=returned-as-float32"}),
    refuses=("takes no dropout",),
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
    empty_rows="uniform",  # a bool mask is a large negative fill (the docstring above)
    empty_rows_docs="https://github.com/keras-team/keras/blob/master/keras/src/backend/torch/nn.py",
    float64_docs="https://github.com/keras-team/keras/blob/master/keras/src/backend/common/dtypes.py",
)


# the survey's root causes read against Keras' documentation (attnzoo.survey.findings)
_ADDITIVE = Review(
    "float32", ("no_allowed_key", "float_mask"), "divergence",
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
    says="mask filters out logits, and an additive mask is to be passed as bias instead.",
    note="The additive form (0 / -inf) of a row that masks every key gives zeros (torch's "
         "SDPA), where the bool form gives the mean of the values (checked on keras 3.15.1).")
FINDINGS = (
    _ADDITIVE, replace(_ADDITIVE, dtype="float64"),
    replace(_ADDITIVE, features=("no_allowed_key", "per_head_mask")),
    replace(_ADDITIVE, dtype="float64", features=("no_allowed_key", "per_head_mask")),

)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return _keras.attend("torch", query, key, value, attn_mask, dropout_p, is_causal, scale,
                         lambda t: t)  # (N, L, H, Ev), as declared


__getattr__ = _lazy.loader(DECLARATION, _sdpa, before=lambda: _keras.ops("torch"))
