"""The varlen reference (clauses V1–V12): judged by its plain-loop oracle on a seeded sweep,
pinned by worked examples computed by hand, and reduced to the dense SDPA reference."""

import math

import numpy as np
import pytest
import torch

from reference import varlen_loop
from reference.sdpa import scaled_dot_product_attention as sdpa
from reference.space import VARLEN
from reference.varlen import attn_varlen

NAN = float("nan")


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def cumulative(lengths):
    return i32([0, *np.cumsum(lengths).tolist()])


def packed_case(rng, lens_q, lens_k, Hq=2, Hk=2, D=4, Dv=None, guard=0):
    """Packed q, k, v with NaN in every row no sequence owns (guard rows of q, a tail of k)."""
    Dv = Dv or D
    total_q, total_k = sum(lens_q) + guard, sum(lens_k) + 2
    q = torch.from_numpy(rng.standard_normal((total_q, Hq, D)))  # (total_q, Hq, D)
    k = torch.from_numpy(rng.standard_normal((total_k, Hk, D)))  # (total_k, Hk, D)
    v = torch.from_numpy(rng.standard_normal((total_k, Hk, Dv)))  # (total_k, Hk, Dv)
    q[sum(lens_q):], k[sum(lens_k):], v[sum(lens_k):] = NAN, NAN, NAN
    args = dict(cu_seqlens_q=cumulative(lens_q), cu_seqlens_k=cumulative(lens_k))
    return q, k, v, args


def paged_kv(rng, lens_k, Hk, D, Dv, block_size, spare=2, shared=False):
    """A paged cache of the keys (blocks in a random physical order, ``spare`` blocks more than
    needed) with NaN in every slot no sequence uses; each sequence gets one extra allocated
    block so seqused_k stays below what is allocated."""
    per_seq = [-(-n // block_size) + 1 for n in lens_k]  # blocks allocated to each sequence
    num_blocks = sum(per_seq) + spare
    k = torch.full((num_blocks, block_size, Hk, D), NAN, dtype=torch.float64)
    v = torch.full((num_blocks, block_size, Hk, Dv), NAN, dtype=torch.float64)
    physical = rng.permutation(num_blocks).tolist()
    table = torch.zeros(len(lens_k), max(per_seq), dtype=torch.int32)
    for b, n in enumerate(per_seq):
        table[b, :n] = i32(physical[:n])
        physical = physical[n:]
    if shared and len(lens_k) >= 2:
        table[1, 0] = table[0, 0]  # a shared prefix block: sequence 1 starts with 0's keys
    for b, n in enumerate(lens_k):
        for p in range(n):
            block, slot = int(table[b, p // block_size]), p % block_size
            if torch.isnan(k[block, slot]).any():  # a shared slot keeps its first keys
                k[block, slot] = torch.from_numpy(rng.standard_normal((Hk, D)))
                v[block, slot] = torch.from_numpy(rng.standard_normal((Hk, Dv)))
    return k, v, dict(block_table=table, seqused_k=i32(lens_k))


WINDOWS = ("none", "left", "right", "both", "zero", "wide")


def window(kind, rng):
    w = lambda: int(rng.integers(0, 4))  # noqa: E731
    return {"none": (-1, -1), "left": (w(), -1), "right": (-1, w()), "both": (w(), w()),
            "zero": (0, 0), "wide": (50, 50)}[kind]


def random_case(seed):
    """One case of the sweep: every feature drawn at random, each present about half the time."""
    rng = np.random.default_rng(seed)
    B = int(rng.integers(1, 5))
    lens_q = [int(n) for n in rng.integers(0, 7, B)]
    lens_k = [int(n) for n in rng.integers(0, 9, B)]
    lens_q[0], lens_k[0] = (1, 1) if seed % 3 == 0 else (lens_q[0], lens_k[0])
    Hk = int(rng.choice([1, 2]))
    Hq = Hk * int(rng.choice([1, 2, 3]))  # MHA, GQA, and MQA when Hk = 1
    D = int(rng.choice([3, 4, 8]))
    Dv = int(rng.choice([D, 5]))
    q, k, v, args = packed_case(rng, lens_q, lens_k, Hq, Hk, D, Dv, guard=int(rng.integers(0, 3)))
    if rng.random() < 0.4:
        k, v, paged = paged_kv(rng, lens_k, Hk, D, Dv, int(rng.integers(1, 5)),
                               shared=rng.random() < 0.5)
        args.update(paged, cu_seqlens_k=None)
    elif rng.random() < 0.3:  # seqused_k below the packed lengths
        args["seqused_k"] = i32([int(rng.integers(0, n + 1)) for n in lens_k])
    args.update(causal=bool(rng.random() < 0.5),
                window_size=window(WINDOWS[seed % len(WINDOWS)], rng))
    if rng.random() < 0.4:
        args["softcap"] = float(rng.choice([0.5, 2.0, 50.0]))
        q = q * 3  # scores large enough for the cap to bend them
    alibi = rng.random()
    if alibi < 0.25:
        args["alibi_slopes"] = torch.from_numpy(rng.random(Hq) * 0.5)  # (Hq,)
    elif alibi < 0.5:
        args["alibi_slopes"] = torch.from_numpy(rng.random((B, Hq)) * 0.5)  # (B, Hq)
    if rng.random() < 0.3:
        args["softmax_scale"] = float(rng.uniform(0.1, 1.0))
    args.update(max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    return q, k, v, args


def reference(q, k, v, args, **kw):
    return attn_varlen(q, k, v, **args, **kw)


def loop(q, k, v, args):
    grid = ("max_seqlen_q", "max_seqlen_k")  # kernels' grid sizes: the loop needs none
    out, lse = varlen_loop.attend(q, k, v, **{a: x for a, x in args.items() if a not in grid})
    (total_q, Hq, _), Dv = q.shape, v.shape[-1]
    return (torch.tensor(out, dtype=torch.float64).reshape(total_q, Hq, Dv),
            torch.tensor(lse, dtype=torch.float64).reshape(Hq, total_q))


def assert_close(got, want, tol=1e-12):
    """Equal within ``tol``, with -inf exactly where the other has -inf, and no NaN."""
    assert not got.isnan().any() and not want.isnan().any()
    assert torch.equal(torch.isneginf(got), torch.isneginf(want))
    finite = torch.isfinite(want)
    assert torch.all((got[finite] - want[finite]).abs() <= tol)


SEEDS = range(48)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_loop_oracle_judges_the_reference(seed):
    q, k, v, args = random_case(seed)
    out, lse = reference(q, k, v, args, return_lse=True)
    want_out, want_lse = loop(q, k, v, args)
    assert out.shape == want_out.shape and lse.shape == (q.shape[1], q.shape[0])
    assert_close(out, want_out)
    assert_close(lse, want_lse)
    assert torch.equal(reference(q, k, v, args), out)  # return_lse=False: the output alone


def features(q, k, v, args):
    """What a case of the sweep exercises, read off its arguments."""
    cu_q = args["cu_seqlens_q"].tolist()
    lens_q = [b - a for a, b in zip(cu_q, cu_q[1:])]
    if args.get("seqused_k") is not None:
        lens_k = args["seqused_k"].tolist()
    else:
        cu_k = args["cu_seqlens_k"].tolist()
        lens_k = [b - a for a, b in zip(cu_k, cu_k[1:])]
    found = {f"group {q.shape[1] // k.shape[-2]}", f"Hk {k.shape[-2]}",
             "window {} {}".format(*(w >= 0 for w in args["window_size"]))}
    for sq, sk in zip(lens_q, lens_k):
        found.add(("sq<sk" if sq < sk else "sq>sk" if sq > sk else "sq=sk")
                  + (" sk=0" if sk == 0 else ""))
        if sq == sk == 1:
            found.add("one token")
    flags = {"several": len(lens_q) > 1, "guard": q.shape[0] > cu_q[-1], "Dv!=D":
             v.shape[-1] != q.shape[-1], "causal": args["causal"], "softcap": args.get("softcap"),
             "paged": args.get("block_table") is not None}
    found |= {name for name, on in flags.items() if on}
    if args.get("alibi_slopes") is not None:
        found.add(f"alibi {args['alibi_slopes'].dim()}-D")
    if flags["paged"] and args["block_table"][:, 0].unique().numel() < len(lens_q):
        found.add("shared")
    return found


def test_the_sweep_reaches_every_feature():
    """The sweep above is only as good as what it draws: every feature, and the lengths."""
    seen = set().union(*(features(*random_case(seed)) for seed in SEEDS))
    assert seen >= {"sq<sk", "sq=sk", "sq>sk", "sq=sk sk=0", "sq>sk sk=0", "one token",
                    "several", "guard", "causal", "window True True", "window True False",
                    "window False True", "window False False", "softcap", "alibi 1-D",
                    "alibi 2-D", "group 1", "group 2", "group 3", "Hk 1", "Dv!=D", "paged",
                    "shared"}, seen


# -- worked examples, computed by hand --------------------------------------------------------


def one_sequence(q, k, v, **kw):
    """Attend one sequence given as (sq, D), (sk, D), (sk, Dv) lists, one head; returns
    (out (sq, Dv), lse (sq,))."""
    q, k, v = (torch.tensor(a, dtype=torch.float64)[:, None, :] for a in (q, k, v))
    out, lse = attn_varlen(q, k, v, i32([0, len(q)]), i32([0, len(k)]), max_seqlen_q=len(q),
                           max_seqlen_k=len(k), return_lse=True, **kw)
    return out[:, 0, :], lse[0]


def test_one_query_two_keys_is_the_weighted_mean():
    # scores ln 3 and 0: weights 3/4 and 1/4, so the output is 3/4·4 + 1/4·8 = 5
    out, lse = one_sequence([[1.0, 0.0]], [[math.log(3), 0.0], [0.0, 0.0]], [[4.0], [8.0]],
                            softmax_scale=1.0)
    assert abs(out.item() - 5.0) <= 1e-15 and abs(lse.item() - math.log(4)) <= 1e-15


def test_a_window_hides_exactly_the_keys_outside_it():
    # one query, three keys, equal scores: the query's diagonal is key 2 (= 0 + 3 - 1)
    q, k, v = [[0.0]], [[0.0]] * 3, [[1.0], [2.0], [4.0]]
    assert one_sequence(q, k, v, window_size=(1, -1))[0].item() == 3.0  # keys 1, 2
    assert abs(one_sequence(q, k, v, window_size=(2, -1))[0].item() - 7 / 3) <= 1e-15  # all
    assert one_sequence(q, k, v, window_size=(0, 0))[0].item() == 4.0  # the diagonal only
    # three queries on three keys: (-1, 0) is causal, (-1, 1) lets query 0 see key 1 as well
    q3 = [[0.0]] * 3
    assert one_sequence(q3, k, v, window_size=(-1, 0))[0][:, 0].tolist() == [1.0, 1.5, 7 / 3]
    assert one_sequence(q3, k, v, window_size=(-1, 1))[0][0].item() == 1.5


def test_causal_is_aligned_bottom_right():
    # 2 queries on 4 keys: query 0 sees keys 0..2, query 1 sees 0..3 (top-left: 0 and 0..1)
    out, _ = one_sequence([[0.0]] * 2, [[0.0]] * 4, [[1.0], [2.0], [3.0], [4.0]], causal=True)
    assert out[:, 0].tolist() == [2.0, 2.5]


def test_softcap_one_on_a_score_of_two_gives_tanh_two():
    out, lse = one_sequence([[2.0]], [[1.0]], [[7.0]], softmax_scale=1.0, softcap=1.0)
    assert abs(lse.item() - math.tanh(2.0)) <= 1e-15  # one key: the LSE is its capped score
    assert out.item() == 7.0
    # with a second key of score 0 the weights are e^tanh2 : 1
    out, lse = one_sequence([[2.0]], [[1.0], [0.0]], [[1.0], [0.0]], softmax_scale=1.0,
                            softcap=1.0)
    w = math.exp(math.tanh(2.0))
    assert abs(out.item() - w / (w + 1)) <= 1e-15
    assert abs(lse.item() - math.log(w + 1)) <= 1e-15


def test_softcap_comes_before_the_alibi_bias():
    # capped first: tanh(2) - 0.5·1; bias first would give tanh(2 - 0.5)
    q, k, v = [[2.0]], [[1.0], [0.0]], [[1.0], [1.0]]
    _, lse = one_sequence(q, k, v, softmax_scale=1.0, softcap=1.0,
                          alibi_slopes=torch.tensor([0.5]))
    # key 0 sits at distance 1 from the diagonal (key 1) and scores tanh(2) - 0.5; key 1 scores 0
    assert abs(lse.item() - math.log(math.exp(math.tanh(2.0) - 0.5) + 1)) <= 1e-15


def test_an_alibi_slope_of_half_at_distance_two_subtracts_one():
    # one query on three keys, all scores 0: distances 2, 1, 0 from the diagonal (key 2)
    out, lse = one_sequence([[0.0]], [[0.0]] * 3, [[1.0], [0.0], [0.0]],
                            alibi_slopes=torch.tensor([0.5]))
    total = math.exp(-1.0) + math.exp(-0.5) + 1.0
    assert abs(lse.item() - math.log(total)) <= 1e-15
    assert abs(out.item() - math.exp(-1.0) / total) <= 1e-15  # the farthest key weighs least


def test_gqa_query_heads_read_their_group_and_alibi_rows_their_sequence():
    q = torch.zeros(2, 4, 1, dtype=torch.float64)  # 2 sequences of one query, Hq = 4
    k = torch.zeros(4, 2, 1, dtype=torch.float64)  # 2 sequences of two keys, Hk = 2
    v = torch.tensor([10.0, 20.0, 30.0, 40.0], dtype=torch.float64).reshape(4, 1, 1) \
        + torch.tensor([0.0, 1.0], dtype=torch.float64).reshape(1, 2, 1)  # kv head 1 adds 1
    slopes = torch.tensor([[0.0] * 4, [math.log(3)] * 4], dtype=torch.float64)  # (B, Hq)
    out = attn_varlen(q, k, v, i32([0, 1, 2]), i32([0, 2, 4]), max_seqlen_q=1,
                      max_seqlen_k=2, alibi_slopes=slopes)
    # sequence 0 averages its keys; sequence 1 weighs its far key 1/3 of the near one: 1/4, 3/4
    assert out[0, :, 0].tolist() == [15.0, 15.0, 16.0, 16.0]
    assert torch.allclose(out[1, :, 0], torch.tensor([37.5, 37.5, 38.5, 38.5],
                                                     dtype=torch.float64), atol=1e-13, rtol=0)


def test_a_paged_sequence_reads_its_blocks_through_the_table():
    k = torch.arange(8, dtype=torch.float64).reshape(4, 2, 1, 1)  # 4 blocks of 2 slots
    q = torch.zeros(1, 1, 1, dtype=torch.float64)
    # keys 0, 1, 2 are block 2 slot 0, block 2 slot 1, block 0 slot 0: values 4, 5, 0
    out = attn_varlen(q, k, k, i32([0, 1]), max_seqlen_q=1, max_seqlen_k=3,
                      block_table=i32([[2, 0]]), seqused_k=i32([3]))
    assert out.item() == 3.0


# -- the dense contract is the special case ---------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Hk", [3, 1])
def test_one_sequence_is_the_dense_sdpa_contract(causal, Hk):
    rng = np.random.default_rng(5)
    q, k, v, args = packed_case(rng, [7], [7], Hq=3, Hk=Hk, D=5, Dv=6)
    k, v = k[:7], v[:7]  # no NaN tail: SDPA reads every key
    out = attn_varlen(q, k, v, **args, max_seqlen_q=7, max_seqlen_k=7, causal=causal)
    dense = sdpa(*(a.transpose(0, 1)[None] for a in (q, k, v)), is_causal=causal,
                 enable_gqa=Hk != 3)  # (1, H, L, Ev)
    assert (out - dense[0].transpose(0, 1)).abs().max() <= 1e-12


# -- empty rows, guard rows, page placement ----------------------------------------------------


def test_a_row_with_no_visible_key_is_zero_with_lse_minus_inf_and_guard_rows_are_zero():
    rng = np.random.default_rng(7)
    # sequence 0: 3 queries on 1 key under causal, so queries 0 and 1 see nothing;
    # sequence 1: 2 queries, no key; then 2 guard rows of NaN past cu_seqlens_q[-1]
    q, k, v, args = packed_case(rng, [3, 2], [1, 0], guard=2)
    out, lse = attn_varlen(q, k, v, **args, max_seqlen_q=3, max_seqlen_k=1, causal=True,
                           return_lse=True)
    empty = [0, 1, 3, 4, 5, 6]
    assert out[empty].eq(0).all() and torch.isneginf(lse[:, empty]).all()
    assert out[2].abs().gt(0).all() and torch.isfinite(lse[:, 2]).all()


def test_page_placement_changes_nothing():
    rng = np.random.default_rng(8)
    lens = [5, 3, 7]
    q, _, _, args = packed_case(rng, [2, 3, 1], lens, Hq=4, Hk=2)
    k, v, paged = paged_kv(rng, lens, 2, 4, 4, block_size=2, shared=True)
    kw = dict(max_seqlen_q=3, max_seqlen_k=7, causal=True, return_lse=True)
    out, lse = attn_varlen(q, k, v, args["cu_seqlens_q"], **paged, **kw)
    move = torch.from_numpy(rng.permutation(k.shape[0]))  # block x moves to move[x]
    k2, v2 = torch.empty_like(k), torch.empty_like(v)
    k2[move], v2[move] = k, v
    table2 = move[paged["block_table"].long()].to(torch.int32)
    out2, lse2 = attn_varlen(q, k2, v2, args["cu_seqlens_q"], block_table=table2,
                             seqused_k=paged["seqused_k"], **kw)
    assert (move != torch.arange(len(move))).any()  # the cache did move
    assert torch.equal(out2, out) and torch.equal(lse2, lse)


# -- precision --------------------------------------------------------------------------------

UNIT_ROUNDOFF = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


@pytest.mark.parametrize("dtype", list(UNIT_ROUNDOFF), ids=str)
def test_low_precision_is_one_rounding_from_float64(dtype):
    """Scores, softmax and LSE run in float32 and the output is rounded once to the input's
    format: against float64 on the same (rounded) inputs each output is off by at most one
    rounding (u·|exact|) plus float32's few roundings, and the LSE by float32's alone. Kept in
    float16 or bfloat16 throughout, the LSE is off by thousands of float32 roundings."""
    rng = np.random.default_rng(10)
    q, k, v, args = packed_case(rng, [9, 16, 5], [20, 16, 1], Hq=4, Hk=2, D=16, Dv=8)
    kw = dict(max_seqlen_q=16, max_seqlen_k=20, causal=True, window_size=(12, -1), softcap=2.0,
              alibi_slopes=torch.full((4,), 0.25), return_lse=True)
    q, k, v = (torch.nan_to_num(a).to(dtype) for a in (q, k, v))
    out, lse = attn_varlen(q, k, v, **args, **kw)
    exact, exact_lse = attn_varlen(q.double(), k.double(), v.double(), **args, **kw)
    assert out.dtype == dtype and lse.dtype == torch.float32
    float32 = 16 * 2.0 ** -24  # a few roundings of float32 sums of ~20 terms
    bound = UNIT_ROUNDOFF[dtype] * exact.abs() + float32 * v.double().abs().max()
    assert torch.all((out.double() - exact).abs() <= bound)
    finite = torch.isfinite(exact_lse)
    assert finite.sum() > 50  # most rows see keys
    assert torch.all((lse.double() - exact_lse)[finite].abs()
                     <= float32 * exact_lse[finite].abs().clamp(min=1))


# -- the contract's arguments and its space ----------------------------------------------------


def test_inconsistent_arguments_are_refused():
    rng = np.random.default_rng(9)
    q, k, v, args = packed_case(rng, [3, 2], [4, 2])
    with pytest.raises(ValueError, match="max_seqlen"):
        attn_varlen(q, k, v, **args, max_seqlen_q=2, max_seqlen_k=4)
    with pytest.raises(ValueError, match="cu_seqlens_k is required"):
        attn_varlen(q, k, v, args["cu_seqlens_q"], max_seqlen_q=3, max_seqlen_k=4)
    with pytest.raises(ValueError, match="seqused_k"):
        attn_varlen(q, k[None], v[None], args["cu_seqlens_q"], max_seqlen_q=3,
                    max_seqlen_k=4, block_table=i32([[0], [0]]))
    with pytest.raises(ValueError, match="query heads"):
        attn_varlen(q[:, :1], k, v, **args, max_seqlen_q=3, max_seqlen_k=4)


def test_the_varlen_space_is_measured_not_declared():
    """Coverage of the varlen space is measured (tests/test_coverage.py fails on a value no
    detector reaches at deep that says no reason); no value claims a blanket gap, and the one
    declared reason says why nothing can reach it."""
    values = [v for axis in VARLEN for v in axis.values]
    assert len(values) >= 40
    assert not any(v.gap for v in values)
    assert [v.name for v in values if v.no_gradient] == ["on"]  # return_lse: no LSE gradient


def test_a_call_is_read_for_what_it_sends():
    """A derived call is read from its own arguments: the key slices of a shuffled paged case
    are packed, with no window, and the gradient detector's calls are marked as such."""
    from detectors.kit import varlen

    case = varlen.battery(0)[3]  # decode against a shuffled paged cache
    assert {("paging", "permuted"), ("causal", "on")} <= varlen.call_values(case, False)
    sliced = varlen.call_values(varlen.key_slices(case), True)
    assert ("paging", "packed") in sliced and ("paging", "permuted") not in sliced
    assert {("causal", "off"), ("window", "none"), ("return_lse", "on")} <= sliced
