"""timm's ``timm.layers.Attention`` with ``fused_attn = False``: its unfused core.

timm's Attention is a self-attention block on one token tensor x (N, T, C): one qkv Linear,
then ``q * scale @ kᵀ``, the mask (a bool mask turned into -inf where False by timm's
resolve_self_attn_mask, or ``is_causal``), ``softmax(-1)``, ``@ v``, then the ``proj`` Linear.
Converts: x = [query | key | value] concatenated on the features of the merged heads,
(N, H, L, E) → (N, L, 3·H·E), with ``qkv`` the identity (3·H·E square, no bias) so that timm's
own split gives back exactly query, key and value (x·I is exact); ``proj`` the identity without
bias; the answer (N, L, H·E) back to (N, H, L, E), a reshape and a transpose. One token tensor
means L = S and one head size; ``dropout_p`` becomes ``attn_drop`` in training mode.
"""

from attnzoo.survey.adapters import _lazy
from attnzoo.survey.capabilities import Declaration

DECLARATION = Declaration(
    name="timm-attention", title="timm.layers.Attention, fused_attn=False",
    distribution="timm", module="timm.layers",
    unsupported=frozenset({"rectangular", "e_ne_ev", "rank_other_than_4", "scale", "gqa"}),
    refuses=("takes no scale",),
    install="pip install timm with a torchvision built for this torch (the registry's torchvision "
            "links CUDA and fails to import on the CPU wheel)",
    docs="https://huggingface.co/docs/timm",
)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch
    from timm.layers import Attention

    from attnzoo.survey.adapters import _mha

    if scale is not None:  # refused, never ignored: an ignored scale would pose as a bug
        raise NotImplementedError("timm Attention takes no scale")
    heads, head = query.shape[1], query.shape[-1]
    width = heads * head
    x = torch.cat([_mha.merge(query), _mha.merge(key), _mha.merge(value)], -1)  # (N, L, 3HE)
    block = Attention(3 * width, num_heads=heads, attn_head_dim=head, dim_out=width,
                      qkv_bias=False, proj_bias=False, attn_drop=dropout_p,
                      dtype=query.dtype, device=query.device).train(dropout_p > 0)
    block.fused_attn = False
    with torch.no_grad():
        block.qkv.weight.copy_(torch.eye(3 * width, dtype=query.dtype))  # (3HE, 3HE)
        block.proj.weight.copy_(torch.eye(width, dtype=query.dtype))  # (HE, HE)
    return _mha.split(block(x, attn_mask=attn_mask, is_causal=is_causal), heads)  # (N, H, L, E)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
