"""Conversions the adapters share: layouts and array types, nothing that touches the math."""

import numpy as np
import torch


def heads_last(x):
    """(N, H, L, E) → (N, L, H, E): the (batch, time, heads, features) layout. A transpose."""
    return x.transpose(1, 2)


def heads_first(x):
    """(N, L, H, E) → (N, H, L, E): back to the harness's layout. A transpose."""
    return x.transpose(1, 2)


def to_numpy(x):
    """A torch tensor (or None) as a NumPy array of the same dtype and values."""
    return None if x is None else x.detach().cpu().numpy()


def to_torch(a, like):
    """A NumPy-like answer as a torch tensor on ``like``'s device, dtype as computed."""
    return torch.from_numpy(np.array(a)).to(like.device)


def rank4(mask):
    """A mask broadcastable to (N, H, L, S) with leading axes of size 1 added: a reshape."""
    if mask is None:
        return None
    return mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape)) if mask.ndim < 4 else mask


def full_mask(mask, query, key):
    """A mask broadcastable to (N, H, L, S) as the 4-D (N, H_m, L, S) mask transformers' mask
    builders hand their attention functions (masking_utils expands its own to (batch, 1, q, kv)):
    size-1 batch, query and key axes broadcast (a view), the head axis kept as given."""
    if mask is None:
        return None
    m = rank4(mask)  # (…, H_m, L|1, S|1)
    return m.expand(query.shape[0], m.shape[1], query.shape[-2], key.shape[-2])  # (N, H_m, L, S)


def bool_as_additive(mask, dtype, fill):
    """A keep-convention bool mask as the additive float mask a library takes: 0 or ``fill``."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.tensor(fill, dtype=dtype, device=mask.device))
