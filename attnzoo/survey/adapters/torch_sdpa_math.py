"""torch.nn.functional.scaled_dot_product_attention with only the MATH backend enabled.

Converts nothing: the call is passed through unchanged inside ``sdpa_kernel(SDPBackend.MATH)``.
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="torch-sdpa-math", title="torch F.scaled_dot_product_attention, MATH backend",
    distribution="torch", module="torch.nn.attention", refuses=("No available kernel",),
    docs="https://pytorch.org/docs/stable/generated/"
         "torch.nn.functional.scaled_dot_product_attention.html",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                              dropout_p=dropout_p, is_causal=is_causal,
                                              scale=scale, enable_gqa=enable_gqa)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
