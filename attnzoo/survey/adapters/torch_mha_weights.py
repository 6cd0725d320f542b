"""torch.nn.MultiheadAttention's weights path: need_weights=True, average_attn_weights=False.

Converts what :mod:`attnzoo.survey.adapters._mha` describes (identity projections, heads
merged into the embedding, MHA's True = masked convention); returns the attention output of the
path that also computes the per-head weights (F.multi_head_attention_forward's explicit
softmax), not the weights.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration, Review

DECLARATION = Declaration(
    name="torch-mha-weights", title="torch nn.MultiheadAttention, need_weights=True",
    distribution="torch", module="torch",
    # one head size for q, k, v; no scale, is_causal (a hint only), GQA; (N, L, E) batches only
    unsupported=frozenset({"e_ne_ev", "rank_other_than_4", "scale", "is_causal", "gqa"}),
    refuses=("takes no scale", "does not match value shape",
             "Need attn_mask if specifying the is_causal hint"),
    docs="https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html",
)


# the survey's root causes read against torch's documentation (attnzoo.survey.findings)
_SAME_RESULT = Review(
    "float32", ("no_allowed_key",), "divergence",
    docs="https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html",
    says="need_weights=False only switches to the optimized scaled_dot_product_attention "
         "for speed, so both paths should give the same output.",
    note="A query every key is masked from gets NaN with need_weights=True and zeros with "
         "need_weights=False (checked on torch 2.13.0).",
    issue="https://github.com/pytorch/pytorch/issues/160064")
FINDINGS = (_SAME_RESULT, replace(_SAME_RESULT, dtype="float64"))


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    from attnzoo.survey.adapters import _mha

    return _mha.attend(query, key, value, attn_mask, dropout_p, is_causal, scale,
                       need_weights=True, average_attn_weights=False)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
