"""keras.ops.dot_product_attention, KERAS_BACKEND=numpy.

Converts: torch tensors to NumPy arrays and the answer back (values and dtype unchanged); a
bool mask to ``mask`` (True =
attend, as SDPA), a float mask to ``bias``, each broadcast to rank 4 by adding size-1 axes;
``flash_attention=False`` (the CPU path). Grouped heads are keras' own. Keras' (N, L, H, E)
layout is declared (``layout=BLHE``): the harness transposes, not the adapter.
"""

from attnzoo.survey.adapters import _keras, _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="keras-numpy", title="keras.ops.dot_product_attention (numpy backend)",
    distribution="keras", module="keras",
    unsupported=frozenset({"rank_other_than_4", "dropout", "autograd", "layout=BLHE"}),
    refuses=("takes no dropout",),
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import numpy as np

    from attnzoo.survey.adapters import _convert

    out = _keras.attend("numpy", query, key, value, attn_mask, dropout_p, is_causal, scale,
                        _convert.to_numpy)
    return _convert.to_torch(np.asarray(out), query)  # (N, L, H, Ev), as declared


__getattr__ = _lazy.loader(DECLARATION, _sdpa, before=lambda: _keras.ops("numpy"))
