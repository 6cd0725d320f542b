"""The varlen call as one FlexAttention call on the packed token axis; imports torch, so each
adapter imports it inside the function that calls it.

FlexAttention has no sequences, causal flag, window, cap or ALiBi of its own: its documentation
spells each as a ``mask_mod`` or a ``score_mod`` (https://pytorch.org/blog/flexattention/:
document masking ``document_id[q_idx] == document_id[kv_idx]``, the sliding window
``q_idx - kv_idx <= SLIDING_WINDOW``, soft-capping ``tanh(score / cap) * cap``, ALiBi a per-head
slope times a distance added to the score). This module writes the contract's clauses in those
forms, per token of the packed axis, and passes them with the tensors as (1, H, total, D):

- sequences: each query and key carries its sequence number; a key past ``seqused_k`` and a
  guard row of q belong to none, so they never meet;
- causal and window: bottom-right, as the contract's clauses V3 and V4 state them, on the
  position ``d = i + sk − sq`` each query is aligned with (the blog's masks are the square case);
- softcap then ALiBi: a ``score_mod`` on flex's scaled score, the blog's tanh cap and
  ``−slope·|d − j|`` (the contract's symmetric distance; the blog's example is its causal half);
- the paged cache: gathered here, page by page, into packed keys; page placement therefore
  tests this adapter, not the library;
- GQA: flex's own ``enable_gqa``; the LSE: flex's own ``AuxRequest(lse=True)``, (1, Hq, total)
  read as (Hq, total), its values untouched; the scale: flex's ``scale``.
"""


def gather_pages(k, v, block_table, seqused_k):
    """(k, v, cu_seqlens_k) packed from a paged cache: sequence b's first ``seqused_k[b]``
    keys, page by page, in order."""
    import torch

    block_size = k.shape[1]
    ks, vs, counts = [], [], []
    for b, n in enumerate(int(x) for x in seqused_k.tolist()):
        p = torch.arange(n)
        block = block_table[b].long()[p // block_size]
        ks.append(k[block, p % block_size])
        vs.append(v[block, p % block_size])
        counts.append(n)
    cu = torch.tensor([0, *torch.tensor(counts, dtype=torch.long).cumsum(0).tolist()])
    return torch.cat(ks), torch.cat(vs), cu


def packed(k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table):
    """(k, v, cu_q, cu_k, used): the keys packed (a paged cache gathered), the offsets as lists
    of ints, and the keys each sequence uses: what every adapter starts from."""
    if block_table is not None:
        k, v, cu_seqlens_k = gather_pages(k, v, block_table, seqused_k)
        seqused_k = None
    cu_q = [int(x) for x in cu_seqlens_q.tolist()]
    cu_k = [int(x) for x in cu_seqlens_k.tolist()]
    used = [int(x) for x in seqused_k.tolist()] if seqused_k is not None else \
        [cu_k[b + 1] - cu_k[b] for b in range(len(cu_k) - 1)]
    return k, v, cu_q, cu_k, used


def tokens(cu_q, cu_k, used, total_q, total_k):
    """Per query: sequence (−1 for guard rows) and aligned position d; per key: sequence (−2
    past what its sequence uses) and position j. int32 tensors."""
    import torch

    q_doc = torch.full((total_q,), -1, dtype=torch.int32)
    q_diag = torch.zeros(total_q, dtype=torch.int32)
    k_doc = torch.full((total_k,), -2, dtype=torch.int32)
    k_pos = torch.zeros(total_k, dtype=torch.int32)
    for b in range(len(cu_q) - 1):
        sq, sk = cu_q[b + 1] - cu_q[b], used[b]
        q_doc[cu_q[b]:cu_q[b + 1]] = b
        q_diag[cu_q[b]:cu_q[b + 1]] = torch.arange(sq, dtype=torch.int32) + (sk - sq)
        k_doc[cu_k[b]:cu_k[b] + sk] = b
        k_pos[cu_k[b]:cu_k[b] + sk] = torch.arange(sk, dtype=torch.int32)
    return q_doc, q_diag, k_doc, k_pos


def attend(flex, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, softmax_scale,
           causal, window_size, softcap, alibi_slopes, return_lse):
    """``flex`` (flex_attention, compiled or not) on the varlen call, as the docstring says."""
    import torch
    from torch.nn.attention.flex_attention import AuxRequest, create_block_mask

    k, v, cu_q, cu_k, used = packed(k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table)
    total_q, total_k = q.shape[0], k.shape[0]
    q_doc, q_diag, k_doc, k_pos = tokens(cu_q, cu_k, used, total_q, total_k)
    wl, wr = window_size

    def mask_mod(b, h, q_idx, kv_idx):
        d, j = q_diag[q_idx], k_pos[kv_idx]
        keep = q_doc[q_idx] == k_doc[kv_idx]
        if causal:
            keep = keep & (j <= d)
        if wl >= 0:
            keep = keep & (j >= d - wl)
        if wr >= 0:
            keep = keep & (j <= d + wr)
        return keep

    row = q_doc.clamp(min=0)  # a guard row's sequence, for indexing only: it sees no key
    slopes = None if alibi_slopes is None else alibi_slopes.to(q.dtype)

    def score_mod(score, b, h, q_idx, kv_idx):
        if softcap > 0:
            score = score / softcap
            score = torch.tanh(score)
            score = score * softcap
        if slopes is not None:
            slope = slopes[row[q_idx], h] if slopes.dim() == 2 else slopes[h]
            score = score - slope * (q_diag[q_idx] - k_pos[kv_idx]).abs()
        return score

    mask = create_block_mask(mask_mod, 1, None, total_q, total_k, device=q.device)
    heads_first = [t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)]  # (1, H, total, D)
    got = flex(*heads_first, score_mod=score_mod, block_mask=mask, scale=softmax_scale,
               enable_gqa=q.shape[1] != k.shape[1],
               return_aux=AuxRequest(lse=True) if return_lse else None)
    out, aux = got if return_lse else (got, None)
    out = out[0].transpose(0, 1)  # (1, Hq, total_q, Dv) → (total_q, Hq, Dv)
    return (out, aux.lse[0]) if return_lse else out  # lse (1, Hq, total_q) → (Hq, total_q)
