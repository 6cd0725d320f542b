"""Packed variable-length attention, flash-attention's calling convention (clauses V1–V12).

The sequences of a batch lie end to end along one token axis, cut apart by ``cu_seqlens``; keys
may instead be read through a paged cache. Each sequence is gathered into dense per-head
tensors, given its visibility mask and ALiBi bias from the clauses, and attended to on its own.
Float64 inputs are computed in float64; float32, float16 and bfloat16 inputs in float32, with
the output rounded once at the end, as kernels accumulate. :mod:`reference.varlen_loop` judges
this file and shares no code with it.
"""

import math

import torch


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    """``out`` (total_q, Hq, Dv), and with ``return_lse`` also ``lse`` (Hq, total_q).

    q (total_q, Hq, D); k, v (total_k, Hk, D|Dv), or paged (num_blocks, block_size, Hk, D|Dv)
    with ``block_table`` (B, max_blocks) and ``seqused_k`` (B,).
    """
    total_q, Hq, D = q.shape
    Hk, Dv = v.shape[-2:]
    if Hq % Hk:
        raise ValueError(f"Hq={Hq} query heads cannot share Hk={Hk} key/value heads (V7)")
    starts = spans(cu_seqlens_q, total_q, "cu_seqlens_q")  # (B+1,) as ints
    B = len(starts) - 1
    sk_of = key_counts(k, cu_seqlens_k, seqused_k, block_table, B)  # B key counts
    for b in range(B):
        sq, sk = starts[b + 1] - starts[b], sk_of[b]
        if sq > max_seqlen_q or sk > max_seqlen_k:
            raise ValueError(f"sequence {b} has {sq} queries and {sk} keys, more than "
                             f"max_seqlen_q={max_seqlen_q} or max_seqlen_k={max_seqlen_k} (V1)")
    work = torch.float64 if q.dtype == torch.float64 else torch.float32  # V11
    scale = 1 / math.sqrt(D) if softmax_scale is None else softmax_scale  # V5

    out = torch.zeros(total_q, Hq, Dv, dtype=work, device=q.device)  # V9: no sequence -> 0
    lse = torch.full((Hq, total_q), -math.inf, dtype=work, device=q.device)  # V8, V9
    for b in range(B):
        sq, sk = starts[b + 1] - starts[b], sk_of[b]
        if sq == 0 or sk == 0:
            continue  # no query, or no key to see: the rows stay 0 with LSE -inf (V8)
        rows = slice(starts[b], starts[b + 1])
        kb, vb = keys_of(k, v, b, sk, cu_seqlens_k, block_table)  # (sk, Hk, D), (sk, Hk, Dv)
        qb = q[rows].to(work).transpose(0, 1)  # (Hq, sq, D)
        kb = kb.to(work).repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)  # (Hq, sk, D), V7
        vb = vb.to(work).repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)  # (Hq, sk, Dv)
        s = (qb * scale) @ kb.transpose(-2, -1)  # (Hq, sq, sk)
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)  # (Hq, sq, sk), V5: before bias and mask
        if alibi_slopes is not None:
            slopes = alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes  # (Hq,)
            s = s - slopes.to(work)[:, None, None] * distance(sq, sk, q.device).to(work)  # V6
        s = s.masked_fill(~visible(sq, sk, causal, window_size, q.device), -math.inf)
        o, l = attend(s, vb)  # (Hq, sq, Dv), (Hq, sq)
        out[rows] = o.transpose(0, 1)  # (sq, Hq, Dv)
        lse[:, rows] = l
    out = out.to(q.dtype)  # V11: one rounding, at the end
    return (out, lse) if return_lse else out


def spans(cu_seqlens, total, name):
    """The offsets as ints, checked: from 0, non-decreasing, within the packed axis (V1)."""
    cu = [int(c) for c in cu_seqlens.tolist()]
    if not cu or cu[0] != 0 or any(a > b for a, b in zip(cu, cu[1:])) or cu[-1] > total:
        raise ValueError(f"{name} must start at 0, never decrease and end within {total}: {cu}")
    return cu


def key_counts(k, cu_seqlens_k, seqused_k, block_table, B):
    """sk for each sequence: ``seqused_k[b]`` when given, else its share of cu_seqlens_k."""
    if block_table is not None:
        if seqused_k is None:
            raise ValueError("a paged cache (block_table) needs seqused_k (V2)")
        capacity = block_table.shape[1] * k.shape[1]  # max_blocks · block_size
        allocated = [capacity] * B
    elif cu_seqlens_k is None:
        raise ValueError("without a paged cache cu_seqlens_k is required (V1)")
    else:
        cu = spans(cu_seqlens_k, k.shape[0], "cu_seqlens_k")
        allocated = [cu[b + 1] - cu[b] for b in range(B)]
    used = allocated if seqused_k is None else [int(n) for n in seqused_k.tolist()]
    if len(used) != B or any(not 0 <= n <= a for n, a in zip(used, allocated)):
        raise ValueError(f"seqused_k {used} exceeds the keys allocated to the sequences "
                         f"{allocated} (V1, V2)")
    return used


def keys_of(k, v, b, sk, cu_seqlens_k, block_table):
    """Sequence b's first sk keys and values, (sk, Hk, D) and (sk, Hk, Dv): packed or paged."""
    if block_table is None:  # V1: rows cu_seqlens_k[b] … of the packed axis
        start = int(cu_seqlens_k[b])
        return k[start:start + sk], v[start:start + sk]
    p = torch.arange(sk, device=k.device)  # (sk,) logical positions, V2
    block_size = k.shape[1]
    block = block_table[b].to(device=k.device, dtype=torch.long)[p // block_size]  # (sk,)
    slot = p % block_size  # (sk,)
    return k[block, slot], v[block, slot]  # (sk, Hk, D), (sk, Hk, Dv)


def diagonal(sq, sk, device):
    """(sq, 1) the key each query is aligned with, bottom-right: d = i + sk − sq."""
    return torch.arange(sq, device=device)[:, None] + (sk - sq)


def visible(sq, sk, causal, window_size, device):
    """(sq, sk) bool: query i may see key j (V3 causal, V4 window); j < sk by construction."""
    d = diagonal(sq, sk, device)  # (sq, 1)
    j = torch.arange(sk, device=device)[None, :]  # (1, sk)
    wl, wr = window_size
    keep = torch.ones(sq, sk, dtype=torch.bool, device=device)  # (sq, sk)
    if causal:
        keep = keep & (j <= d)
    if wl >= 0:  # -1 (any negative): unbounded on the left
        keep = keep & (j >= d - wl)
    if wr >= 0:
        keep = keep & (j <= d + wr)
    return keep


def distance(sq, sk, device):
    """(sq, sk) |d − j|: how far key j lies from query i's diagonal, the ALiBi distance (V6)."""
    return (diagonal(sq, sk, device) - torch.arange(sk, device=device)[None, :]).abs()


def attend(s, v):
    """(softmax(s) @ v, logsumexp(s)) over the last axis, -inf where hidden; an empty row
    gives 0 and -inf (V8, V10)."""
    top = s.amax(dim=-1, keepdim=True)  # (H, sq, 1) row maximum
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)  # empty row: shift by 0
    e = torch.exp(s - top)  # (H, sq, sk) in [0, 1], exactly 0 where hidden
    total = e.sum(dim=-1, keepdim=True)  # (H, sq, 1), 0 on an empty row
    out = (e @ v) / torch.where(total == 0, torch.ones_like(total), total)  # (H, sq, Dv)
    return out, (top + torch.log(total)).squeeze(-1)  # (H, sq, Dv), (H, sq): log 0 = -inf
