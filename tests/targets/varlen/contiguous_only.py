"""A kernel that takes only contiguous tensors of their own and refuses anything else loudly, as
a launcher that asserts ``is_contiguous()`` does: correct once declared ``strided``."""

from reference.varlen import attn_varlen as _reference


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous() or t.storage_offset():
            raise ValueError(f"{name} must be a contiguous tensor of its own")
    return _reference(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
