"""jax.nn.dot_product_attention (jax[cpu], XLA implementation).

Converts: torch tensors to NumPy arrays and the answer back (values and dtype unchanged; float64
needs ``jax_enable_x64``, switched on in the worker before the first call); a bool mask to ``mask``
(True = attend, as SDPA), a float mask to ``bias``, each broadcast to rank 4 by adding size-1
axes. Grouped heads are JAX's own (N a multiple of K). JAX's (N, L, H, E) layout is declared
(``layout=BLHE``): the harness transposes query, key, value and the answer, not the adapter.

Empty rows: ``uniform``. The page says ``mask`` is "used to filter out logits"; the XLA path
(``_apply_masks`` in ``jax/_src/nn/functions.py``) replaces a masked logit with a large negative
number (``jnp.where(mask, logits, large_negative)``), so a query every key is masked from
softmaxes equal logits: weight 1/S on each key, the mean of the values (checked on jax 0.10.2:
a bool-masked empty row is exactly that mean). A float mask of −∞ is added as a bias, not a
mask, and such a row is NaN, which no convention allows.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="jax-nn", title="jax.nn.dot_product_attention",
    distribution="jax", module="jax",
    # value must have key's shape; BTNH or TNH only; no dropout argument; not torch autograd
    unsupported=frozenset({"e_ne_ev", "rank_other_than_4", "dropout", "autograd",
                           "layout=BLHE", "float64=computed-in-float32"}),
    refuses=("takes no dropout", "value shape should be"),
    docs="https://docs.jax.dev/en/latest/_autosummary/jax.nn.dot_product_attention.html",
    empty_rows="uniform",  # a mask is a large negative fill (the docstring above)
    empty_rows_docs="https://github.com/jax-ml/jax/blob/main/jax/_src/nn/functions.py",
    float64_docs="https://github.com/jax-ml/jax/blob/main/jax/_src/nn/functions.py",
)


# the survey's root causes read against JAX's documentation (attnzoo.survey.findings)
_ADDITIVE = Review(
    "float32", ("no_allowed_key", "float_mask"), "divergence",
    docs="https://docs.jax.dev/en/latest/_autosummary/jax.nn.dot_product_attention.html",
    says="mask filters out logits, and an additive mask is to be passed as bias instead.",
    note="The additive form (0 / -inf) of a row that masks every key gives NaN, where the bool "
         "form gives the mean of the values (checked on jax 0.10.2).")
FINDINGS = (
    _ADDITIVE, replace(_ADDITIVE, dtype="float64"),
    replace(_ADDITIVE, features=("no_allowed_key", "per_head_mask")),
    replace(_ADDITIVE, dtype="float64", features=("no_allowed_key", "per_head_mask")),
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import jax
    import numpy as np
    import torch

    from attnzoo.survey.adapters import _convert

    jax.config.update("jax_enable_x64", True)
    if dropout_p > 0:
        raise NotImplementedError("jax.nn.dot_product_attention takes no dropout")
    q, k, v = (_convert.to_numpy(t) for t in (query, key, value))  # (N, L, H, E) already
    m = _convert.to_numpy(_convert.rank4(attn_mask))
    is_bool = attn_mask is not None and attn_mask.dtype == torch.bool
    out = jax.nn.dot_product_attention(q, k, v, bias=None if is_bool else m,
                                       mask=m if is_bool else None, scale=scale,
                                       is_causal=is_causal)
    return _convert.to_torch(np.asarray(out), query)  # (N, L, H, Ev), as declared


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
