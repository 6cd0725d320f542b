"""The tests an engineer might write for a packed, paged attention kernel (docs/varlen.md),
taking the kernel as the `varlen` fixture: ``attnzoo grade`` runs them against the varlen
reference, every bug of zoo/varlen and its decoys. A plain float64 loop in this file is the
expected answer; nothing of attnzoo's is imported.

tests/test_varlen_check.py grades this suite: no correct kernel fails a test, and each test
catches the bugs its docstring names (among others).
"""

import math

import torch


def naive(q, k, v, lens_q, lens_k, causal=False, window=(-1, -1), softcap=0.0):
    """Row by row: each query's visible keys (diagonal i + sk - sq), softmax, weighted values."""
    Hq, Hk = q.shape[1], k.shape[1]
    out = torch.zeros(q.shape[0], Hq, v.shape[-1], dtype=torch.float64)
    q0 = k0 = 0
    for sq, sk in zip(lens_q, lens_k):
        j = torch.arange(sk)
        for i in range(sq):
            d = i + sk - sq
            keep = torch.ones(sk, dtype=torch.bool)
            if causal:
                keep &= j <= d
            if window[0] >= 0:
                keep &= j >= d - window[0]
            if window[1] >= 0:
                keep &= j <= d + window[1]
            if not keep.any():
                continue
            for h in range(Hq):
                kh = h // (Hq // Hk)
                s = k[k0:k0 + sk, kh].double() @ q[q0 + i, h].double() / math.sqrt(q.shape[-1])
                if softcap > 0:
                    s = softcap * torch.tanh(s / softcap)
                w = torch.softmax(s.masked_fill(~keep, -math.inf), 0)
                out[q0 + i, h] = w @ v[k0:k0 + sk, kh].double()
        q0, k0 = q0 + sq, k0 + sk
    return out


def packed(lens_q, lens_k, Hq=4, Hk=2, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lens_q), Hq, D, generator=g, dtype=torch.float64)
    k = torch.randn(sum(lens_k), Hk, D, generator=g, dtype=torch.float64)
    v = torch.randn(sum(lens_k), Hk, D, generator=g, dtype=torch.float64)
    return q, k, v


def offsets(lens):
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)


def call(varlen, q, k, v, lens_q, lens_k, **kw):
    return varlen(q, k, v, offsets(lens_q), offsets(lens_k), max_seqlen_q=max(lens_q),
                  max_seqlen_k=max(lens_k), **kw)


def close(got, want):
    torch.testing.assert_close(got.double(), want, rtol=1e-9, atol=1e-9)


def test_a_packed_batch_is_each_sequence_alone(varlen):
    """Unequal sequences side by side, grouped-query heads (catches offsets and GQA mistakes)."""
    lens = (3, 5, 1, 4)
    q, k, v = packed(lens, lens)
    close(call(varlen, q, k, v, lens, lens), naive(q, k, v, lens, lens))


def test_causal_prefill_and_decode_align_bottom_right(varlen):
    """More keys than queries: the last query sees every key (catches top-left causal)."""
    lens_q, lens_k = (4, 1, 2), (6, 5, 7)
    q, k, v = packed(lens_q, lens_k, seed=1)
    close(call(varlen, q, k, v, lens_q, lens_k, causal=True),
          naive(q, k, v, lens_q, lens_k, causal=True))


def test_a_sliding_window_keeps_both_ends(varlen):
    """Windows on the left and on both sides, ends included (catches off-by-one windows)."""
    lens = (7, 5)
    q, k, v = packed(lens, lens, seed=2)
    for window in ((2, 0), (1, 1), (0, 0)):
        close(call(varlen, q, k, v, lens, lens, causal=window[1] == 0, window_size=window),
              naive(q, k, v, lens, lens, causal=window[1] == 0, window=window))


def test_softcap_bends_large_scores(varlen):
    """A cap well inside the scores' range, with causal masking."""
    lens = (5, 6)
    q, k, v = packed(lens, lens, seed=3)
    q = q * 4
    close(call(varlen, q, k, v, lens, lens, causal=True, softcap=0.7),
          naive(q, k, v, lens, lens, causal=True, softcap=0.7))


def test_a_paged_cache_equals_the_packed_keys(varlen):
    """The same keys in shuffled blocks of 3 (catches block-table mistakes)."""
    lens_q, lens_k, size = (2, 1), (7, 5), 3
    q, k, v = packed(lens_q, lens_k, seed=4)
    blocks = [-(-n // size) for n in lens_k]
    order = torch.randperm(sum(blocks) + 1, generator=torch.Generator().manual_seed(5))
    kc = torch.zeros(len(order), size, *k.shape[1:], dtype=k.dtype)
    vc = torch.zeros_like(kc)
    table = torch.zeros(len(lens_k), max(blocks), dtype=torch.int32)
    used, start = 0, 0
    for b, n in enumerate(lens_k):
        for p in range(n):
            block = int(order[used + p // size])
            table[b, p // size] = block
            kc[block, p % size], vc[block, p % size] = k[start + p], v[start + p]
        used, start = used + blocks[b], start + n
    got = varlen(q, kc, vc, offsets(lens_q), None, max_seqlen_q=max(lens_q),
                 max_seqlen_k=max(lens_k), seqused_k=torch.tensor(lens_k, dtype=torch.int32),
                 block_table=table, causal=True)
    close(got, naive(q, k, v, lens_q, lens_k, causal=True))


def test_a_sequence_without_keys_gives_zeros(varlen):
    """More queries than keys under causal: the first queries see no key, and give zero rows,
    never NaN."""
    lens_q, lens_k = (4, 3), (2, 3)
    q, k, v = packed(lens_q, lens_k, seed=6)
    got = call(varlen, q, k, v, lens_q, lens_k, causal=True)
    assert not got.isnan().any()
    close(got, naive(q, k, v, lens_q, lens_k, causal=True))
