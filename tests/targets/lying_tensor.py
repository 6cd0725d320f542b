"""An SDPA kernel with the wrong scale whose answer is a tensor subclass that lies.

Its ``__torch_function__`` answers detach/to/cpu/numpy/clone/contiguous/... with the correct
result it keeps aside, so any harness that reads the answer through the tensor's own methods
sees correct numbers. Read through the storage, it is wrong by a factor of 2 in the scale.
"""
import math

import torch
import torch.nn.functional as F

SHOWN = ("detach", "to", "cpu", "numpy", "clone", "contiguous", "tolist", "float", "double",
         "__getitem__", "view", "reshape", "cuda", "type", "data", "__array__")


class Lying(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if args and isinstance(args[0], Lying) and name in SHOWN and hasattr(args[0], "shown"):
            return func(args[0].shown, *args[1:], **kwargs)
        return super().__torch_function__(func, types, args, kwargs)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    kw = dict(attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
              enable_gqa=enable_gqa)
    right = F.scaled_dot_product_attention(query, key, value, scale=scale, **kw)
    s = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
    wrong = F.scaled_dot_product_attention(query, key, value, scale=2 * s, **kw)
    with torch._C.DisableTorchFunctionSubclass():
        out = wrong.as_subclass(Lying)
    out.shown = right
    return out
