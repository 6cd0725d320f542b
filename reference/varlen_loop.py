"""The varlen contract as plain Python loops: the judge of :mod:`reference.varlen`.

Written straight from clauses V1–V10, one sequence, one query row, one head and one key at a
time, on Python floats: every score a ``math.fsum`` of products, every cap a ``math.tanh``,
every weight a ``math.exp``. Nothing is vectorised and nothing is shared with the reference, so
a disagreement points at the reference. Slow: meant for cases of a few hundred keys.
"""

import math


def attend(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, seqused_k=None, block_table=None,
           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
           alibi_slopes=None):
    """``(out, lse)`` as nested lists, ``out[t][h][c]`` and ``lse[h][t]``.

    The arguments are as :func:`reference.varlen.attn_varlen` takes them (torch tensors or
    NumPy arrays); ``max_seqlen_q``/``max_seqlen_k`` only size kernels' grids, so they are not
    asked for. Rows of no sequence (V9) are left 0 with LSE -inf, as the reference returns them.
    """
    total_q, Hq, D = q.shape
    Hk, Dv = v.shape[-2], v.shape[-1]
    group = Hq // Hk  # V7: query heads per key/value head
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)
    q, k, v = q.tolist(), k.tolist(), v.tolist()
    cu_q = cu_seqlens_q.tolist()
    cu_k = None if cu_seqlens_k is None else cu_seqlens_k.tolist()
    used = None if seqused_k is None else seqused_k.tolist()
    table = None if block_table is None else block_table.tolist()
    slopes = None if alibi_slopes is None else alibi_slopes.tolist()
    wl, wr = window_size

    out = [[[0.0] * Dv for _ in range(Hq)] for _ in range(total_q)]
    lse = [[-math.inf] * total_q for _ in range(Hq)]
    for b in range(len(cu_q) - 1):
        sq = cu_q[b + 1] - cu_q[b]
        sk = used[b] if used is not None else cu_k[b + 1] - cu_k[b]
        for i in range(sq):
            t = cu_q[b] + i  # the packed row of query i of sequence b
            for h in range(Hq):
                scores, values = [], []
                for j in range(sk):
                    if not sees(i, j, sq, sk, causal, wl, wr):
                        continue
                    key, value = key_value(k, v, b, j, h // group, cu_k, table)
                    s = scale * math.fsum(a * c for a, c in zip(q[t][h], key))
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)  # V5: capped before the bias
                    if slopes is not None:
                        m = slopes[b][h] if isinstance(slopes[0], list) else slopes[h]
                        s = s - m * abs(i + sk - sq - j)  # V6
                    scores.append(s)
                    values.append(value)
                if not scores:
                    continue  # V8: output 0, LSE -inf
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = math.fsum(weights)
                lse[h][t] = top + math.log(total)  # V10
                out[t][h] = [math.fsum(w * val[c] for w, val in zip(weights, values)) / total
                             for c in range(Dv)]
    return out, lse


def sees(i, j, sq, sk, causal, wl, wr):
    """May query i of a sequence of sq queries see its key j of sk (V1, V3, V4)."""
    aligned = i + sk - sq  # the key on query i's diagonal, bottom-right
    if not 0 <= j < sk:
        return False
    if causal and j > aligned:
        return False
    if wl >= 0 and j < aligned - wl:
        return False
    if wr >= 0 and j > aligned + wr:
        return False
    return True


def key_value(k, v, b, j, head, cu_k, table):
    """Key j and value j of sequence b at key/value head ``head``, as lists (V1, V2)."""
    if table is None:
        row = cu_k[b] + j
        return k[row][head], v[row][head]
    block_size = len(k[0])
    block, slot = table[b][j // block_size], j % block_size
    return k[block][slot][head], v[block][slot][head]
