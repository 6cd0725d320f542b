"""The autograd graph is built only when query, key or value requires grad.

A kernel keeps what its backward needs (the weights, or the log-sum-exp of each row) only in
training, and tells training from inference by ``query.requires_grad or key.requires_grad or
value.requires_grad``. A float mask can require grad as well: a learnable bias trained while
the projections are frozen, or a mask probed for its saliency. With only the mask requiring
grad the forward takes the inference path, and the mask gets no gradient — or, in a fused
kernel, a backward that reads statistics that were never saved.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="mask-gradient-lost-without-qkv-grad",
    title="Only query, key and value decide whether the forward builds the autograd graph",
    category="gradients",
    symptom="silent",
    lesson="Every differentiable input decides whether the backward is needed, a float mask too.",
    source="",
    seen_in="PyTorch's memory-efficient SDPA saved the log-sum-exp only when query, key or value "
            "required grad, so a float mask that alone required it crashed the backward "
            "(https://github.com/pytorch/pytorch/issues/148476)",
    caught_by=("gradients_of_every_input",),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        training = query.requires_grad or key.requires_grad or value.requires_grad
        with torch.set_grad_enabled(training and torch.is_grad_enabled()):  # BUG: not attn_mask
            return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                    enable_gqa)


SDPA = Sdpa()
