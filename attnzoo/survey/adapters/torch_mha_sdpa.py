"""torch.nn.MultiheadAttention's SDPA path: need_weights=False.

Converts what :mod:`attnzoo.survey.adapters._mha` describes (identity projections, heads
merged into the embedding, MHA's True = masked convention). Without weights to return, MHA
hands the heads to F.scaled_dot_product_attention: this is the path to compare with the
weights path. (The native fast path takes self-attention only, query is key is value, which
a general SDPA call is not.)
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy, torch_mha_weights

# the same module and the same limits as the weights path: only the path differs
DECLARATION = replace(torch_mha_weights.DECLARATION, name="torch-mha-sdpa",
                      title="torch nn.MultiheadAttention, need_weights=False")


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    from attnzoo.survey.adapters import _mha

    return _mha.attend(query, key, value, attn_mask, dropout_p, is_causal, scale,
                       need_weights=False)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
