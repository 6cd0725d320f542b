"""keras.ops.dot_product_attention, KERAS_BACKEND=torch.

Converts: a bool mask to ``mask`` (True = attend, as SDPA), a float mask to ``bias``, each
broadcast to rank 4 by adding size-1 axes; ``flash_attention=False``. Tensors stay torch
tensors (keras' torch backend takes them as they are). Grouped heads are keras' own. Keras'
(N, L, H, E) layout is declared (``layout=BLHE``): the harness transposes, not the adapter.
"""

from attnzoo.survey.adapters import _keras, _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="keras-torch", title="keras.ops.dot_product_attention (torch backend)",
    distribution="keras", module="keras",
    unsupported=frozenset({"rank_other_than_4", "dropout", "layout=BLHE"}),
    refuses=("takes no dropout",),
    docs="https://keras.io/api/ops/nn/#dot_product_attention-function",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    return _keras.attend("torch", query, key, value, attn_mask, dropout_p, is_causal, scale,
                         lambda t: t)  # (N, L, H, Ev), as declared


__getattr__ = _lazy.loader(DECLARATION, _sdpa, before=lambda: _keras.ops("torch"))
