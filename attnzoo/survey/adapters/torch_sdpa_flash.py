"""torch.nn.functional.scaled_dot_product_attention with only FLASH_ATTENTION enabled (CPU kernel).

Converts nothing: the call is passed through unchanged inside
``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``; a call the kernel cannot take is refused with
"No available kernel" rather than falling back to another backend.
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="torch-sdpa-flash", title="torch F.scaled_dot_product_attention, FLASH_ATTENTION backend",
    distribution="torch", module="torch.nn.attention",
    # the CPU flash kernel: q, k, v of one head size, 4-D, no dropout (sdp_utils_cpp.cpp)
    unsupported=frozenset({"e_ne_ev", "rank_other_than_4", "dropout"}),
    refuses=("No available kernel",),
    docs="https://pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                              dropout_p=dropout_p, is_causal=is_causal,
                                              scale=scale, enable_gqa=enable_gqa)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
