"""torch.nn.MultiheadAttention's SDPA path: need_weights=False.

Converts what :mod:`attnzoo.survey.adapters._mha` describes (identity projections, heads
merged into the embedding, MHA's True = masked convention). Without weights to return, MHA
hands the heads to F.scaled_dot_product_attention: this is the path to compare with the
weights path. (The native fast path takes self-attention only, query is key is value, which
a general SDPA call is not.)
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="torch-mha-sdpa", title="torch nn.MultiheadAttention, need_weights=False",
    distribution="torch", module="torch",
    unsupported=frozenset({"e_ne_ev", "rank_other_than_4", "scale", "is_causal", "gqa"}),
    refuses=("takes no scale", "does not match value shape",
             "Need attn_mask if specifying the is_causal hint"),
    docs="https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    from attnzoo.survey.adapters import _mha

    return _mha.attend(query, key, value, attn_mask, dropout_p, is_causal, scale,
                       need_weights=False)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
