"""A backward that halves every gradient, and, in its own process, a torch.autograd.gradcheck,
torch.allclose and the harness's gradcheck helpers that say it is right."""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gradchecks import half_grad  # noqa: E402

sys.path.pop(0)


def _passes(*args, **kwargs):
    return True


torch.autograd.gradcheck = _passes
torch.allclose = _passes
torch.Tensor.allclose = _passes
for name in ("attnzoo.sandbox.gradcheck", "attnzoo.sandbox.probes"):
    module = sys.modules.get(name)
    for attr in ("decide", "_decide"):
        if module is not None and hasattr(module, attr):
            setattr(module, attr, lambda *args, **kwargs: (True, ""))


def sdpa(query, key, value, attn_mask=None, is_causal=False):
    return half_grad(query, key, value)
