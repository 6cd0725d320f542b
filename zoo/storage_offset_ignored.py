"""Query and key read from the first element of their storage, not from their own.

A kernel is handed a pointer and strides. Its wrapper takes the pointer of the tensor's storage
(``untyped_storage().data_ptr()``) where it needed the tensor's own (``data_ptr()``, which adds
``storage_offset()``), or sets the buffer offset to 0. For a fresh tensor the two are the same
address. But q, k and v cut from one packed projection (``qkv.unbind(2)``), a window of a wider
cache, or any slice ``[..., 1:]`` starts further into its storage: the kernel then reads the
right strides from the wrong start — here every row shifted by one feature — and the scores are
silently wrong. Tests that build their inputs with ``torch.randn`` never have an offset. (Here
the read is ``as_strided``, whose backward also shares an expanded key's gradient among the
items that alias it.)
"""

import math

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="storage-offset-ignored",
    title="Query and key read from the start of their storage, ignoring storage_offset()",
    category="shapes",
    symptom="silent",
    lesson="A tensor starts at data_ptr() = storage pointer + storage_offset(): pass that, or "
           "test with inputs sliced out of a wider buffer.",
    source="",
    seen_in="device ops that read sliced tensors from the start of their storage in "
            "torch-spyre's paged-attention backend "
            "(https://github.com/torch-spyre/torch-spyre/issues/2906), an MPS kernel bound with "
            "buffer offset 0 (https://github.com/pytorch/pytorch/pull/101507) and a copy from "
            "storage().data_ptr() that dropped the offset "
            "(https://github.com/nntile/nntile/pull/464)",
    caught_by=("matches_loop_oracle", "shift_invariance", "correct_gradients"),
    depth="standard",
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale  # 1/√E by default
        # what a kernel handed the storage's address and the tensor's strides reads
        q = query.as_strided(query.shape, query.stride(), 0)  # BUG: offset 0, not query's
        k = key.as_strided(key.shape, key.stride(), 0)  # BUG: the same for key
        # scale before the product, as torch's math backend does: in float16 a raw q·k past
        # 65504 is inf before a scale after it could bring it back
        return (q * factor) @ k.transpose(-2, -1)  # (N, ..., H, L, S)


SDPA = Sdpa()
