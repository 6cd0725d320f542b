"""The varlen contract's harness: its cases, its calls, its expected answers and its verdicts.

A varlen target is a callable with flash-attention's ``attn_varlen(q, k, v, cu_seqlens_q,
cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k, seqused_k=None, block_table=None,
softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
return_lse=False)`` on torch tensors (clauses V1–V12 of :mod:`reference`). A detector of
``detectors/varlen/`` receives a :class:`Subject` (the target, its declared convention and one
dtype) and raises :class:`VarlenMismatch` when its property fails.

Cases are seeded and small enough for a CPU: several unequal sequences, empty and one-token
sequences, paged caches with shuffled blocks whose size divides no length, GQA and MQA, windows
on either side, exactly one key wide, and wider than the sequence, caps small enough to bend the
scores and logits large enough to overflow a naive tanh, ALiBi slopes per head and per batch
row, decode and chunked prefill under causal, D ≠ Dv, guard rows, and one sequence longer than a
64-wide tile, and q, k and v as strided views (head-major storage; a fused projection's rows
and an interleaved cache, their gaps NaN). Padding (keys allocated but unused, spare pages,
guard rows of q) holds large finite garbage by default; :func:`poisoned` fills it with NaN so
that a read shows.

Tolerances are measured against the float64 reference for float32 and float64 inputs, and
against the same-precision reference (float32 inside, one rounding) for float16 and bfloat16.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from detectors.kit import varlen_capabilities
from detectors.kit.depths import DEPTHS
from detectors.kit.verdict import NotApplicable
from reference.varlen import attend, attn_varlen, key_counts, keys_of, spans

ALIGNMENTS = ("bottom-right", "top-left")  # V3: bottom-right is the contract's default
# V8: what a row that sees no key returns. "zero": out 0, LSE -inf (the contract, FA3 and FA2's
# split path); "lse +inf": out 0, LSE +inf (FA2's non-split path); "unmasked": the row attends
# every key of its sequence instead (HF's _unmask_unattended), 0 and -inf when it has none;
# "uniform": the mean of its sequence's values, the equal weights a finite fill (finfo.min)
# gives every key, its LSE unjudged (0 when it has no key)
EMPTY_ROWS = ("zero", "lse +inf", "unmasked", "uniform")
# V4: how window_size=(wl, wr) counts. "inclusive": d - wl <= j <= d + wr, wl + wr + 1 keys
# (flash-attention); "counts the current token": each bounded side counts the query's own key,
# so (W, 0) keeps W keys, as HF/Mistral's sliding_window=W means (W - 1, 0)
WINDOW_COUNTING = ("inclusive", "counts the current token")
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
# absolute tolerance per unit of the largest |value| (and of |LSE|), per dtype
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3,
             torch.bfloat16: 3e-2}
GARBAGE = 7.0  # the scale of the finite garbage left in padding
# the largest |score| a case may keep once its cap is taken out: float32 rounds a score s by
# |s|·2⁻²⁴, which stays well under TOLERANCE[float32] only while |s| is this small (uncapped
# cases stay under 7; the case of logits past exp's range reaches thousands)
UNCAPPED_SCORES = 64.0


class VarlenMismatch(AssertionError):
    """A varlen property failed: the message names the case, the relation and the evidence."""


class SetAside(NotApplicable):
    """What the detector needs is declared unsupported by the target: the detector is
    ``unsupported`` for it, as a case of the SDPA contract is."""


@dataclass(frozen=True)
class Case:
    """One call of the contract: the tensors, the keywords, and what the case is made of."""

    name: str
    q: torch.Tensor  # (total_q, Hq, D)
    k: torch.Tensor  # (total_k, Hk, D) or (num_blocks, block_size, Hk, D)
    v: torch.Tensor  # as k, with Dv
    args: dict  # every keyword but q, k, v, return_lse
    lens_q: tuple  # queries per sequence
    lens_k: tuple  # keys used per sequence
    values: frozenset = field(default_factory=frozenset)  # ("axis", "value") of the VARLEN space

    @property
    def B(self):
        return len(self.lens_q)

    @property
    def paged(self):
        return self.args.get("block_table") is not None

    @property
    def heads(self):
        return self.q.shape[1], self.k.shape[-2]

    def with_(self, name=None, **changes):
        """The same case with some tensors or keywords replaced."""
        tensors = {n: changes.pop(n) for n in ("q", "k", "v") if n in changes}
        return replace(self, name=name or self.name, args={**self.args, **changes}, **tensors)

    def to(self, dtype):
        """The case at another dtype; ALiBi slopes stay float32 (float64 for float64), V6."""
        cast = {n: strided_like(getattr(self, n).to(dtype), getattr(self, n))
                for n in ("q", "k", "v")}
        args = dict(self.args)
        if args.get("alibi_slopes") is not None:
            wide = torch.float64 if dtype == torch.float64 else torch.float32
            args["alibi_slopes"] = args["alibi_slopes"].to(wide)
        dtype_name = str(dtype).removeprefix("torch.")
        return replace(self, **cast, args=args, values=self.values | {("dtype", dtype_name)})


# V12: how q, k and v lie in memory
LAYOUTS = ("contiguous", "at an offset", "head-major", "fused buffers")


def strided_like(values, like):
    """``values`` laid out as ``like`` is: its strides and storage offset, in a buffer whose
    elements no view element covers are NaN (a view into a wider buffer, as a caller's fused
    projection or interleaved cache is, its gaps poisoned). Contiguous ``like``: ``values``."""
    if (like.is_contiguous() and not like.storage_offset()) or not like.numel():
        return values.contiguous()
    offset = like.storage_offset()
    extent = offset + sum((n - 1) * st for n, st in zip(like.shape, like.stride())) + 1
    base = torch.full((extent,), math.nan, dtype=values.dtype)
    view = base.as_strided(like.shape, like.stride(), offset)
    view.copy_(values)
    return view


def laid_out(q, k, v, layout):
    """q, k and v with their values, lying in memory as ``layout`` (:data:`LAYOUTS`) says. V12:
    only the last dimension need be contiguous (flash-attention's own requirement).

    at an offset: contiguous rows sliced from a larger buffer, its first rows NaN (a batch's
    later sequences, a cache's later blocks). head-major: each tensor stored head by head, its
    token axis strided by D (a model's ``(B, H, S, D).transpose(1, 2)``; FlashInfer's HND
    cache). fused buffers: q the first Hq heads of a fused projection's rows, (total_q,
    Hq + 2·Hk, D); k and v slots 0 and 1 of an interleaved cache, (…, 2, Hk, D)
    (flash-attention's kvpacked, FlashInfer's NHD cache), v at a storage offset."""
    if layout == "contiguous":
        return q, k, v
    if layout == "at an offset":
        return tuple(strided_like(t, torch.empty(t.shape[0] + 3, *t.shape[1:])[3:])
                     for t in (q, k, v))
    if layout == "head-major":
        return tuple(strided_like(t, t.transpose(-3, -2).contiguous().transpose(-3, -2))
                     for t in (q, k, v))
    if layout == "fused buffers":
        Hq, Hk = q.shape[-2], k.shape[-2]
        qkv = torch.empty(q.shape[0], Hq + 2 * Hk, q.shape[-1], dtype=q.dtype)
        kv = torch.empty(*k.shape[:-2], 2, Hk, max(k.shape[-1], v.shape[-1]), dtype=k.dtype)
        return (strided_like(q, qkv[:, :Hq]), strided_like(k, kv[..., 0, :, :k.shape[-1]]),
                strided_like(v, kv[..., 1, :, :v.shape[-1]]))
    raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")


def layout_of(*tensors):
    """The :data:`LAYOUTS` value q, k and v reach, read from their strides."""
    if all(t.is_contiguous() for t in tensors):
        return "at an offset" if any(t.storage_offset() for t in tensors) else "contiguous"
    if any(t.shape[-2] > 1 and t.shape[-3] > 1 and t.stride(-3) == t.shape[-1]
           and t.stride(-2) != t.shape[-1] for t in tensors):
        return "head-major"
    return "fused buffers"


def i32(values):
    return torch.tensor(list(values), dtype=torch.int32)


def cumulative(lengths):
    return i32([0, *np.cumsum(lengths, dtype=np.int64).tolist()])


def build(seed, name, lens_q, lens_k, *, Hq=2, Hk=2, D=8, Dv=None, block_size=None,
          shuffle=True, spare=2, extra=0, guard=0, causal=False, window=(-1, -1), softcap=0.0,
          alibi=None, scale=None, q_gain=1.0, shared=False, layout="contiguous"):
    """A float64 case; ``extra`` allocates keys past those used (seqused_k), ``guard`` adds rows
    of q past the last sequence, ``block_size`` pages the cache (blocks in a shuffled physical
    order unless ``shuffle=False``, ``spare`` blocks nobody uses), ``layout`` lays q, k and v
    out in memory (:func:`laid_out`). Padding holds garbage."""
    rng = np.random.default_rng(seed)
    Dv = Dv or D
    lens_q, lens_k = tuple(lens_q), tuple(lens_k)
    B = len(lens_q)
    normal = lambda *shape: torch.from_numpy(rng.standard_normal(shape))  # noqa: E731
    total_q = sum(lens_q) + guard
    q = normal(total_q, Hq, D) * q_gain  # (total_q, Hq, D)
    q[sum(lens_q):] = normal(guard, Hq, D) * GARBAGE
    args = dict(cu_seqlens_q=cumulative(lens_q), max_seqlen_q=max(lens_q, default=0),
                max_seqlen_k=max(lens_k, default=0) + extra, causal=causal,
                window_size=tuple(window), softcap=softcap)
    if block_size is None:
        allocated = [n + extra for n in lens_k]
        k = normal(sum(allocated) + 2, Hk, D) * GARBAGE  # (total_k, Hk, D), a garbage tail
        v = normal(sum(allocated) + 2, Hk, Dv) * GARBAGE
        starts = np.cumsum([0, *allocated])
        for b, n in enumerate(lens_k):
            k[starts[b]:starts[b] + n] = normal(n, Hk, D)
            v[starts[b]:starts[b] + n] = normal(n, Hk, Dv)
        args["cu_seqlens_k"] = cumulative(allocated)
        if extra:
            args["seqused_k"] = i32(lens_k)
    else:
        per_seq = [-(-(n + extra) // block_size) for n in lens_k]  # blocks each sequence owns
        width = max(max(per_seq, default=1), 1)
        num_blocks = sum(per_seq) + spare
        k = normal(num_blocks, block_size, Hk, D) * GARBAGE
        v = normal(num_blocks, block_size, Hk, Dv) * GARBAGE
        physical = (rng.permutation(num_blocks) if shuffle else np.arange(num_blocks)).tolist()
        table = torch.full((B, width), int(physical[-1]), dtype=torch.int32)  # unused: a spare
        for b, n in enumerate(per_seq):
            table[b, :n] = i32(physical[:n])
            physical = physical[n:]
        if shared and B >= 2 and per_seq[0] and per_seq[1]:
            table[1, 0] = table[0, 0]  # a shared prefix block
        written = set()
        for b, n in enumerate(lens_k):
            for p in range(n):
                block, slot = int(table[b, p // block_size]), p % block_size
                if (block, slot) not in written:  # a shared slot keeps its first keys
                    written.add((block, slot))
                    k[block, slot] = normal(Hk, D)
                    v[block, slot] = normal(Hk, Dv)
        args.update(block_table=table, seqused_k=i32(lens_k))
    if scale is not None:
        args["softmax_scale"] = scale
    if alibi == "head":
        args["alibi_slopes"] = torch.from_numpy(rng.uniform(0.05, 0.8, Hq))  # (Hq,)
    elif alibi == "batch":
        args["alibi_slopes"] = torch.from_numpy(rng.uniform(0.05, 0.8, (B, Hq)))  # (B, Hq)
    q, k, v = laid_out(q, k, v, layout)
    values = space_values(lens_q, lens_k, Hq, Hk, D, Dv, block_size, shuffle, shared, extra,
                          guard, causal, window, softcap, alibi, q_gain, layout)
    case = Case(name, q, k, v, args, lens_q, lens_k, frozenset(values))
    return replace(case, values=case.values | {("score size", score_size(case))})


def space_values(lens_q, lens_k, Hq, Hk, D, Dv, block_size, shuffle, shared, extra, guard,
                 causal, window, softcap, alibi, q_gain, layout="contiguous"):
    """The values of :data:`reference.space.VARLEN` a case reaches, as (axis, value) pairs."""
    out = {("sequences", "1" if len(lens_q) == 1 else "several")}
    pairs = list(zip(lens_q, lens_k))
    if any(a == 0 for a in lens_q):
        out.add(("sequences", "empty"))
    if (1, 1) in pairs:
        out.add(("sequences", "one token"))
    for sq, sk in pairs:
        if sq:
            out.add(("lengths", "sk=0" if sk == 0 else "sq<sk" if sq < sk else
                     "sq=sk" if sq == sk else "sq>sk"))
    if block_size is None:
        out.add(("paging", "packed"))
    else:
        out.add(("paging", "permuted" if shuffle else "in order"))
        if shared:
            out.add(("paging", "shared"))
        if block_size == 1:
            out.add(("paging", "page of 1"))
        if any(n % block_size for n in lens_k):
            out.add(("paging", "partial last page"))
    out.add(("seqused_k", "below allocated" if extra else "none"))
    if any(n == 0 for n in lens_k) and (extra or block_size):
        out.add(("seqused_k", "0"))
    wl, wr = window
    longest = max(max(lens_k, default=0), max(lens_q, default=0))
    out.add(("window", "none" if wl < 0 and wr < 0 else "left" if wr < 0 else
             "right" if wl < 0 else "both"))
    if (wl, wr) == (0, 0):
        out.add(("window", "0"))
    if max(wl, wr) >= longest and min(wl, wr) >= 0:
        out.add(("window", "wider than sequence"))
    out.add(("softcap", "0" if not softcap else "far above" if softcap > 1e3 else "small"))
    out.add(("alibi", {None: "none", "head": "per head", "batch": "per batch and head"}[alibi]))
    out.add(("gqa", "off" if Hq == Hk else "mqa" if Hk == 1 else "g=2" if Hq == 2 * Hk
             else "g>2"))
    out.add(("head sizes", "Dv=D" if Dv == D else "Dv!=D"))
    if D > 128:
        out.add(("head sizes", ">128"))
    out.add(("causal", "on" if causal else "off"))
    out.add(("guard rows", "past the end" if guard else "none"))
    out.add(("layout", layout))
    return out


def call_values(case, lse):
    """The values of :data:`reference.space.VARLEN` one call reaches, read from the tensors and
    keywords it sends (not from how the case was built): what coverage counts."""
    args = case.args
    cu = [int(x) for x in args["cu_seqlens_q"]]
    lens_q = [b - a for a, b in zip(cu, cu[1:])]
    table, used = args.get("block_table"), args.get("seqused_k")
    if table is None:
        cu_k = [int(x) for x in args["cu_seqlens_k"]]
        allocated = [b - a for a, b in zip(cu_k, cu_k[1:])]
        size = None
    else:
        size = case.k.shape[1]
        allocated = [table.shape[1] * size] * len(lens_q)  # the capacity, as V2 counts it
    lens_k = allocated if used is None else [int(n) for n in used]
    Hq, Hk = case.heads
    D, Dv = case.q.shape[-1], case.v.shape[-1]
    slopes = args.get("alibi_slopes")
    alibi = None if slopes is None else "batch" if slopes.dim() == 2 else "head"
    out = space_values(lens_q, lens_k, Hq, Hk, D, Dv, size, False, False,
                       used is not None and lens_k != allocated, case.q.shape[0] > cu[-1],
                       args["causal"], args["window_size"], args["softcap"], alibi, 1.0,
                       layout_of(case.q, case.k, case.v))
    out = {(a, v) for a, v in out if a != "paging" or v in ("packed", "page of 1",
                                                            "partial last page")}
    if table is not None:
        pages = [table[b, :-(-n // size)].tolist() for b, n in enumerate(lens_k)]
        runs = [p == list(range(p[0], p[0] + len(p))) for p in pages if p]
        out.add(("paging", "in order" if all(runs) else "permuted"))
        owners = [blk for p in pages for blk in set(p)]
        if len(owners) != len(set(owners)):
            out.add(("paging", "shared"))
    out.add(("dtype", str(case.q.dtype).removeprefix("torch.")))
    out.add(("return_lse", "on" if lse else "off"))
    out.add(("score size", score_size(case)))
    return frozenset(out)


EXP_RANGE = math.log(torch.finfo(torch.float32).max)  # about 88.7: exp overflows float32 past it


def score_size(case):
    """The :data:`reference.space.VARLEN` value of the largest score a softmax exponentiates
    (after the cap, which bounds it): past float32's exp range or not."""
    top = max_score(case)
    if case.args.get("softcap"):
        top = min(top, case.args["softcap"])
    return "past exp's range" if top > EXP_RANGE else "ordinary"


def battery(seed=0, depth="standard"):
    """The float64 cases every detector draws from, seeded; cast with ``Case.to``. ``quick``
    is a handful of them, one per family of features; ``standard`` (the default) all below;
    ``deep`` adds sizes past several 64- and 128-wide tiles, block sizes 16 and 256, D = 256
    and many sequences."""
    if depth not in DEPTHS:
        raise ValueError(f"depth must be one of {DEPTHS}, not {depth!r}")
    cases = standard(seed)
    if depth == "quick":
        return [c for c in cases if c.name in QUICK]
    return cases + (deep(seed) if depth == "deep" else [])


QUICK = ("unequal sequences, one empty, one of one token", "decode against a shuffled paged cache",
         "chunked prefill, GQA", "paged, block size 3 dividing no length", "left window",
         "small softcap", "ALiBi per batch row, window", "MQA with every feature")


def deep(seed):
    """The deep tier's cases: long sequences, big pages and heads, many sequences."""
    s = seed * 1000 + 500
    rng = np.random.default_rng(s)
    many = rng.integers(0, 10, 16).tolist()
    return [
        build(s + 1, "a sequence of 300 tokens, past several 64 and 128 tiles, causal", (300,),
              (300,), causal=True, Hq=1, Hk=1, D=4),
        build(s + 2, "long chunked prefill with a left window, paged in blocks of 16",
              (40, 1, 70), (200, 33, 70), block_size=16, causal=True, window=(100, -1),
              Hq=2, Hk=1, D=4),
        build(s + 3, "one block of 256 keys, ALiBi per head", (3, 2), (300, 20), block_size=256,
              alibi="head", D=4),
        build(s + 4, "heads of 256, softcap", (5, 3), (9, 4), D=256, Dv=256, softcap=5.0,
              q_gain=3.0),
        build(s + 5, "sixteen sequences, some empty, GQA, guard rows", many,
              [n + int(rng.integers(0, 4)) for n in many], Hq=4, Hk=2, guard=3, causal=True),
    ]


def standard(seed):
    """The standard tier's cases."""
    s = seed * 1000
    return [
        build(s + 1, "one sequence", (13,), (13,)),
        build(s + 2, "unequal sequences, one empty, one of one token", (5, 1, 9, 0, 3),
              (7, 1, 12, 0, 3), guard=2),
        build(s + 3, "a sequence with no key", (4, 3), (0, 5), extra=2),
        build(s + 4, "decode against a shuffled paged cache", (1, 1, 1), (9, 17, 4),
              block_size=4, causal=True, Hq=4, Hk=2),
        build(s + 5, "chunked prefill, GQA", (4, 3), (11, 7), causal=True, Hq=4, Hk=2),
        build(s + 6, "more queries than keys, causal", (6, 2), (3, 2), causal=True),
        build(s + 7, "paged, block size 3 dividing no length", (10, 5, 1), (10, 5, 1),
              block_size=3, causal=True, shared=True),
        build(s + 8, "paged, pages of one key", (3, 2), (6, 4), block_size=1),
        build(s + 9, "paged in order, keys below allocated", (2, 5), (7, 5), block_size=4,
              shuffle=False, extra=3),
        build(s + 10, "packed, keys below allocated", (4, 6), (5, 8), extra=3),
        build(s + 11, "left window", (12, 7), (12, 9), window=(2, -1)),
        build(s + 12, "right window", (12, 7), (12, 9), window=(-1, 1)),
        build(s + 13, "window on both sides", (12, 7), (14, 7), window=(3, 2)),
        build(s + 14, "window one key wide", (9, 5), (9, 8), window=(0, 0)),
        build(s + 15, "window wider than the sequences", (9, 5), (9, 8), window=(50, 50)),
        build(s + 16, "causal left window, sq < sk", (5, 8), (12, 8), window=(4, 0), causal=True),
        build(s + 17, "right window zero, not causal", (8, 6), (8, 9), window=(2, 0)),
        build(s + 18, "small softcap", (7, 5), (7, 9), softcap=2.0, q_gain=4.0),
        build(s + 19, "softcap with causal and window", (8, 3), (10, 6), softcap=1.5,
              q_gain=4.0, causal=True, window=(3, -1)),
        build(s + 20, "softcap on logits past exp's range", (5, 4), (6, 4), softcap=1.0,
              q_gain=1000.0),
        build(s + 21, "softcap far above every score", (6, 4), (6, 7), softcap=1e5),
        build(s + 22, "ALiBi per head, causal", (9, 4), (9, 10), alibi="head", causal=True),
        build(s + 23, "ALiBi per batch row, window", (7, 6), (9, 6), alibi="batch",
              window=(3, 1)),
        build(s + 24, "ALiBi at decode", (1, 1), (12, 5), alibi="batch", causal=True,
              block_size=4),
        build(s + 25, "MQA with every feature", (6, 1, 4), (9, 13, 4), Hq=3, Hk=1,
              block_size=5, causal=True, window=(5, -1), softcap=3.0, q_gain=3.0,
              alibi="head"),
        build(s + 26, "GQA with every feature, not causal", (5, 3), (7, 6), Hq=4, Hk=2,
              window=(2, 3), softcap=2.5, q_gain=3.0, alibi="batch", extra=2),
        build(s + 27, "value head of another width, custom scale", (6, 3), (8, 3), D=8, Dv=5,
              scale=0.3),
        build(s + 28, "a head wider than 128", (3, 2), (4, 3), D=136, Dv=136),
        build(s + 29, "one sequence longer than a 64-wide tile, causal", (70,), (70,),
              causal=True, Hq=1, Hk=1, D=4),
        build(s + 30, "ALiBi on rows that see no key", (6, 3, 2), (3, 0, 4), causal=True,
              window=(1, -1), alibi="head"),
        build(s + 31, "q, k and v stored head-major, GQA, causal window", (5, 3, 4), (7, 3, 6),
              Hq=4, Hk=2, causal=True, window=(3, -1), layout="head-major"),
        build(s + 32, "a paged cache stored head by head, ALiBi", (2, 4), (9, 6), block_size=4,
              alibi="head", layout="head-major"),
        build(s + 33, "q from a fused projection, k and v interleaved, keys below allocated",
              (4, 6), (5, 8), Hq=4, Hk=2, extra=2, causal=True, layout="fused buffers"),
        build(s + 34, "a fused projection and an interleaved paged cache, softcap", (3, 1, 5),
              (8, 6, 5), Hq=2, Hk=1, block_size=3, softcap=2.0, q_gain=3.0,
              layout="fused buffers"),
        build(s + 35, "q, k and v sliced at an offset from larger buffers, guard rows", (4, 2),
              (4, 5), guard=1, window=(2, 1), layout="at an offset"),
        build(s + 36, "scores past exp's range, no cap, GQA, causal", (5, 3, 7), (6, 4, 9),
              Hq=4, Hk=2, causal=True, q_gain=40.0),
    ]


def poisoned(case, fill=math.nan):
    """The case with every element no sequence owns filled with ``fill``: guard rows of q, keys
    and values allocated but unused, pages nobody uses and slots past the used length."""
    q, k, v = case.q.clone(), case.k.clone(), case.v.clone()
    q[sum(case.lens_q):] = fill
    used = torch.zeros(k.shape[:-2], dtype=torch.bool)  # (total_k,) or (blocks, block_size)
    if case.paged:
        table, size = case.args["block_table"], k.shape[1]
        for b, n in enumerate(case.lens_k):
            for p in range(n):
                used[int(table[b, p // size]), p % size] = True
    else:
        cu = case.args["cu_seqlens_k"]
        for b, n in enumerate(case.lens_k):
            used[int(cu[b]):int(cu[b]) + n] = True
    k[~used], v[~used] = fill, fill
    return case.with_(case.name + " (padding poisoned with NaN)", q=q, k=k, v=v)


def alone(case, b):
    """Sequence b of the case as a batch of one, as a caller would send it on its own."""
    rows = slice(int(case.args["cu_seqlens_q"][b]), int(case.args["cu_seqlens_q"][b + 1]))
    args = dict(case.args, cu_seqlens_q=i32([0, rows.stop - rows.start]))
    if case.paged:
        args.update(block_table=case.args["block_table"][b:b + 1],
                    seqused_k=case.args["seqused_k"][b:b + 1])
        k, v = case.k, case.v
    else:
        cu = case.args["cu_seqlens_k"]
        keys = slice(int(cu[b]), int(cu[b + 1]))
        k, v = case.k[keys], case.v[keys]
        args["cu_seqlens_k"] = i32([0, keys.stop - keys.start])
        if case.args.get("seqused_k") is not None:
            args["seqused_k"] = case.args["seqused_k"][b:b + 1]
    slopes = case.args.get("alibi_slopes")
    if slopes is not None and slopes.dim() == 2:
        args["alibi_slopes"] = slopes[b:b + 1]
    return replace(case, name=f"{case.name}, sequence {b} alone", q=case.q[rows], k=k, v=v,
                   args=args, lens_q=(case.lens_q[b],), lens_k=(case.lens_k[b],))


def permute_pages(case, seed):
    """The paged case with its physical blocks moved to new places and the table following."""
    n = case.k.shape[0]
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(n))  # old block -> new
    k, v = torch.empty_like(case.k), torch.empty_like(case.v)
    k[perm], v[perm] = case.k, case.v
    table = perm[case.args["block_table"].long()].to(torch.int32)
    return case.with_(case.name + " (pages moved)", k=k, v=v, block_table=table)


def unpaged(case, name=None):
    """The paged case (or one with seqused_k) with the keys each sequence uses packed end to
    end instead: the same keys, no table, nothing allocated past them."""
    ks, vs = [], []
    for b, n in enumerate(case.lens_k):
        kb, vb = keys_of(case.k, case.v, b, n, case.args.get("cu_seqlens_k"),
                         case.args.get("block_table"))
        ks.append(kb)
        vs.append(vb)
    args = {a: x for a, x in case.args.items() if a not in ("block_table", "seqused_k")}
    args["cu_seqlens_k"] = cumulative(case.lens_k)
    return replace(case, name=name or case.name + " (keys packed, no pages)", k=torch.cat(ks),
                   v=torch.cat(vs), args=args)


def only_sequences(case, keep):
    """The case with only the sequences ``keep`` (in order; the guard rows and the padding
    stay), or None when it keeps none."""
    if not keep:
        return None
    a, span = case.args, lambda cu, b: torch.arange(int(cu[b]), int(cu[b + 1]))
    cu_q = a["cu_seqlens_q"]
    rows = torch.cat([span(cu_q, b) for b in keep] + [torch.arange(int(cu_q[-1]),
                                                                   case.q.shape[0])])
    lens_q, lens_k = tuple(case.lens_q[b] for b in keep), tuple(case.lens_k[b] for b in keep)
    args = dict(a, cu_seqlens_q=cumulative(lens_q), max_seqlen_q=max(lens_q))
    k, v, picked = case.k, case.v, torch.tensor(keep)
    if case.paged:
        args.update(block_table=a["block_table"][picked], seqused_k=a["seqused_k"][picked])
    else:
        cu_k = a["cu_seqlens_k"]
        keys = torch.cat([span(cu_k, b) for b in keep] + [torch.arange(int(cu_k[-1]),
                                                                       case.k.shape[0])])
        k, v = case.k[keys], case.v[keys]
        args["cu_seqlens_k"] = cumulative([int(cu_k[b + 1] - cu_k[b]) for b in keep])
        if a.get("seqused_k") is not None:
            args["seqused_k"] = a["seqused_k"][picked]
    slopes = a.get("alibi_slopes")
    if slopes is not None and slopes.dim() == 2:
        args["alibi_slopes"] = slopes[picked]
    return replace(case, q=case.q[rows], k=k, v=v, args=args, lens_q=lens_q, lens_k=lens_k)


def dense(case):
    """The case with q, k and v as contiguous tensors of their own, the values the same."""
    own = {n: getattr(case, n).clone(memory_format=torch.contiguous_format) for n in "qkv"}
    return replace(case, **own)


def without(case, words):
    """``case`` with the features ``words`` name taken out, each replaced by the contract's
    plain spelling (no table, no cap, no ALiBi, one key/value head per query head, …), so that
    the rest of the case is still judged; None when a word names what cannot be taken out (a
    sequence's lengths, the dtype)."""
    plain = case
    for word in words:
        a = plain.args
        if word in ("paged", "seqused_k"):
            plain = unpaged(plain, plain.name) if plain.paged or "seqused_k" in a else plain
        elif word == "causal":
            plain = plain.with_(causal=False)
        elif word in ("window", "window_right"):
            plain = plain.with_(window_size=(-1, -1) if word == "window" else
                                (a["window_size"][0], -1))
        elif word == "softcap":
            if max_score(plain) > UNCAPPED_SCORES:  # the cap was what kept it judgeable
                return None
            plain = plain.with_(softcap=0.0)
        elif word in ("alibi", "alibi_per_batch"):
            slopes = a.get("alibi_slopes")
            plain = plain.with_(alibi_slopes=None if word == "alibi" or slopes is None
                                else slopes[0].clone())  # (B, Hq) -> the first row's, (Hq,)
        elif word == "gqa":
            plain = repeated_heads(plain)
        elif word == "sq_ne_sk":  # the sequences with as many queries as keys, if any
            plain = only_sequences(plain, [b for b in range(plain.B)
                                           if plain.lens_q[b] == plain.lens_k[b]])
            if plain is None:
                return None
        elif word == "strided":
            plain = dense(plain)
        elif word == "dv_ne_d":
            D, Dv = plain.q.shape[-1], plain.v.shape[-1]
            pad = plain.v.new_zeros(*plain.v.shape[:-1], max(0, D - Dv))
            plain = plain.with_(v=torch.cat([plain.v[..., :D], pad], -1))
        else:
            return None
    return replace(plain, name=f"{case.name} (without {', '.join(words)})")


# -- expected answers ---------------------------------------------------------------------------


def reference(case, alignment="bottom-right"):
    """(out, lse) of the reference: float64 for float32/float64 inputs, the same-precision
    reference (float32 inside, rounded once) for float16/bfloat16."""
    q, k, v = case.q, case.k, case.v
    if q.dtype in (torch.float32, torch.float64):
        q, k, v = q.double(), k.double(), v.double()
    slopes = case.args.get("alibi_slopes")
    args = dict(case.args, alibi_slopes=None if slopes is None else slopes.double())
    if alignment == "top-left":
        return top_left(q, k, v, **args)
    return attn_varlen(q, k, v, **args, return_lse=True)


def top_left(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
             seqused_k=None, block_table=None, softmax_scale=None, causal=False,
             window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    """The reference with its diagonal at d = i (top-left, a declared convention of V3): the
    causal mask, the window and the ALiBi distance all count from the first key."""
    del max_seqlen_q, max_seqlen_k
    total_q, Hq, D = q.shape
    Hk, Dv = v.shape[-2:]
    starts = spans(cu_seqlens_q, total_q, "cu_seqlens_q")
    sk_of = key_counts(k, cu_seqlens_k, seqused_k, block_table, len(starts) - 1)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1 / math.sqrt(D) if softmax_scale is None else softmax_scale
    out = torch.zeros(total_q, Hq, Dv, dtype=work)
    lse = torch.full((Hq, total_q), -math.inf, dtype=work)
    for b, sk in enumerate(sk_of):
        sq = starts[b + 1] - starts[b]
        if sq == 0 or sk == 0:
            continue
        rows = slice(starts[b], starts[b + 1])
        kb, vb = keys_of(k, v, b, sk, cu_seqlens_k, block_table)
        kb = kb.to(work).repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)  # (Hq, sk, D)
        vb = vb.to(work).repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)  # (Hq, sk, Dv)
        s = (q[rows].to(work).transpose(0, 1) * scale) @ kb.transpose(-2, -1)  # (Hq, sq, sk)
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        i, j = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
        if alibi_slopes is not None:
            slopes = alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes
            s = s - slopes.to(work)[:, None, None] * (i - j).abs().to(work)
        keep = torch.ones(sq, sk, dtype=torch.bool)
        wl, wr = window_size
        if causal:
            keep &= j <= i
        if wl >= 0:
            keep &= j >= i - wl
        if wr >= 0:
            keep &= j <= i + wr
        o, l = attend(s.masked_fill(~keep, -math.inf), vb)
        out[rows], lse[:, rows] = o.transpose(0, 1), l
    return out.to(q.dtype), lse


# -- the target and its calls -------------------------------------------------------------------


@dataclass
class Target:
    """A varlen callable, the conventions it declares, and what it declares it does not
    support (:mod:`detectors.kit.varlen_capabilities`)."""

    fn: object
    name: str = "target"
    causal_alignment: str = "bottom-right"
    empty_rows: str = "zero"
    window_counting: str = "inclusive"
    unsupported: tuple = ()

    def __post_init__(self):
        self.unsupported = varlen_capabilities.parse(self.unsupported)
        for what, value, allowed in (("causal alignment", self.causal_alignment, ALIGNMENTS),
                                     ("empty rows", self.empty_rows, EMPTY_ROWS),
                                     ("window counting", self.window_counting,
                                      WINDOW_COUNTING)):
            if value not in allowed:
                raise ValueError(f"{what} must be one of {allowed}, not {value!r}")


def declared_window(window_size, counting):
    """The window_size a target of the given counting needs for the contract's (wl, wr)."""
    if counting == "inclusive":
        return tuple(window_size)
    return tuple(w + 1 if w >= 0 else w for w in window_size)


def snapshot(case):
    return [t.clone() for t in (case.q, case.k, case.v) + tuple(
        x for x in case.args.values() if isinstance(x, torch.Tensor))]


def same_bits(a, b):
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


class Subject:
    """What a varlen detector works with: the target at one dtype, its cases and its judge."""

    def __init__(self, target, dtype=torch.float64, seed=0, depth="standard"):
        if depth not in DEPTHS:
            raise ValueError(f"depth must be one of {DEPTHS}, not {depth!r}")
        self.target, self.dtype, self.seed, self.depth = target, dtype, seed, depth
        self._cases = None
        self.calls = []  # every case sent, for coverage
        self.set_aside = {}  # case name -> the declared words it uses
        self.without = {}  # case name -> the declared words it is run without

    @property
    def alignment(self):
        return self.target.causal_alignment

    def cases(self):
        """The battery at this dtype, each case that uses what the target declares it does not
        support run without it where that can be taken out (:func:`without`, recorded in
        ``without``), else set aside (recorded in ``set_aside``)."""
        if self._cases is None:
            battery_cases = (c.to(self.dtype) for c in battery(self.seed, self.depth))
            self._cases = [c for c in map(self.plain, battery_cases) if c is not None]
        return self._cases

    def plain(self, case):
        """``case``, or, when it uses what the target declares unsupported, the case without
        it (recorded in ``without``), or None when that cannot be taken out (recorded in
        ``set_aside``). What every detector does with a case it builds itself."""
        words = self.lacks(case)
        if not words:
            return case
        plain = without(case, words)
        if plain is None or self.lacks(plain):
            self.set_aside[case.name] = ", ".join(words)
            return None
        self.without[plain.name] = ", ".join(words)
        return plain

    def case(self, name_part):
        found = next((c for c in self.cases() if name_part in c.name), None)
        if found is None:
            raise SetAside(f"its case ({name_part}) is set aside: it uses "
                           f"{self.set_aside.get(name_part, 'what the target lacks')}")
        return found

    def lacks(self, case):
        """The declared-unsupported words ``case``'s call uses."""
        declared = getattr(self.target, "unsupported", ())
        return varlen_capabilities.blocking(declared, call_values(case, False)) if declared \
            else []

    def supported(self, case):
        """Whether the target supports ``case``'s call; if not, the case is set aside."""
        words = self.lacks(case)
        if words:
            self.set_aside[case.name] = ", ".join(words)
        return not words

    def offers(self, word):
        """Whether the target offers ``word`` of the vocabulary (``lse``, ``autograd``)."""
        return word not in getattr(self.target, "unsupported", ())

    def require(self, word):
        """NotApplicable, naming the declaration, unless the target offers ``word``."""
        if not self.offers(word):
            raise SetAside(f"the property needs {varlen_capabilities.VOCABULARY[word]}, "
                           "which the target declares unsupported")

    def run(self, case, lse=False, inputs_untouched=False, raw=False):
        """(out, lse or None) from the target; a raise or a wrong shape is a mismatch.

        The case is written in the contract's conventions; unless ``raw``, the call is made in
        the target's declared ones (its window counting) and its empty rows are read back as
        the contract's (0, LSE -inf), so that a declared convention is judged once, by its
        probe, and every other detector judges the rest. A call that uses what the target
        declares unsupported is never made (NotApplicable); one asking for the LSE of a target
        that declares ``lse`` unsupported is made without it, and its LSE is None."""
        if not self.offers("strided"):  # what it cannot take, it gets as dense copies
            case = dense(case)
        if not self.supported(case):
            raise SetAside(f"{case.name}: uses {self.set_aside[case.name]}, which the "
                           "target declares unsupported")
        lse = lse and self.offers("lse")
        self.calls.append(replace(case, values=call_values(case, lse)))
        before = snapshot(case) if inputs_untouched else None
        args = case.args
        if not raw:
            args = dict(args, window_size=declared_window(args["window_size"],
                                                          self.target.window_counting))
        try:
            got = self.target.fn(case.q, case.k, case.v, **args, return_lse=lse)
        except Exception as error:  # noqa: BLE001 - any raise on a valid call is a finding
            raise VarlenMismatch(f"{case.name}: raised {type(error).__name__}: {error}") from error
        out, l = got if lse else (got, None)
        total_q, Hq = case.q.shape[:2]
        want = (total_q, Hq, case.v.shape[-1])
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
            raise VarlenMismatch(f"{case.name}: out should be a tensor {want}, got "
                                 f"{getattr(out, 'shape', type(out).__name__)}")
        if out.dtype != case.q.dtype:
            raise VarlenMismatch(f"{case.name}: out is {out.dtype}, the input is {case.q.dtype} "
                                 "(V11)")
        if lse and (not isinstance(l, torch.Tensor) or tuple(l.shape) != (Hq, total_q)):
            raise VarlenMismatch(f"{case.name}: lse should be a tensor {(Hq, total_q)}, got "
                                 f"{getattr(l, 'shape', type(l).__name__)}")
        if before is not None:
            after = snapshot(case)
            if not all(same_bits(a, b) for a, b in zip(before, after)):
                raise VarlenMismatch(f"{case.name}: the call changed its inputs (V9)")
        if not raw and self.target.empty_rows != "zero":
            empty = empty_rows(case, self.alignment)  # (total_q,)
            out = torch.where(empty[:, None, None], torch.zeros((), dtype=out.dtype), out)
            if l is not None:
                l = torch.where(empty[None, :], torch.full((), -math.inf, dtype=l.dtype), l)
        return out, l

    def expected(self, case):
        return reference(case, self.alignment)

    def tolerance(self, want, slack=1):
        finite = want[torch.isfinite(want)]
        top = float(finite.abs().max()) if finite.numel() else 1.0
        return TOLERANCE[self.dtype] * max(1.0, top) * slack

    def same(self, got, want, case, what="out", relation="should equal the reference",
             rows=None, tolerance=1):
        """Equal within the dtype's tolerance, -inf where the other is -inf, no NaN; ``rows``
        restricts the comparison to those token rows (the first axis of out, the last of lse);
        ``tolerance`` multiplies the dtype's tolerance."""
        got, want = got.detach().double().cpu(), want.detach().double().cpu()
        if rows is not None:
            got, want = (got[rows], want[rows]) if what == "out" else (got[:, rows],
                                                                       want[:, rows])
        if got.shape != want.shape:
            raise VarlenMismatch(f"{case.name}: {what} has shape {tuple(got.shape)}, "
                                 f"{relation} of shape {tuple(want.shape)}")
        nan = got.isnan() & ~want.isnan()
        if nan.any():
            raise VarlenMismatch(f"{case.name}: {what} has NaN at {index(nan)} where a number is "
                                 f"due ({relation})")
        inf = torch.isneginf(got) != torch.isneginf(want)
        if inf.any():
            at = index(inf)
            raise VarlenMismatch(f"{case.name}: {what}{list(at)} = {got[at].item():.6g}, "
                                 f"{relation}: {want[at].item():.6g}")
        both = torch.isfinite(want) & torch.isfinite(got)
        gap = torch.where(both, (got - want).abs(), torch.zeros_like(got))
        gap = torch.where(torch.isfinite(got) == torch.isfinite(want), gap,
                          torch.full_like(got, math.inf))
        tol = self.tolerance(want, tolerance)
        if (gap > tol).any():
            at = index(gap > tol)
            raise VarlenMismatch(f"{case.name}: {what}{list(at)} = {got[at].item():.6g}, "
                                 f"{relation}: {want[at].item():.6g} (tolerance {tol:.2g})")


def index(flags):
    return tuple(int(i) for i in flags.nonzero()[0])


def verdict(detector, target, dtypes=("float64", "float32"), seed=0, depth="standard"):
    """("pass", None), ("fail", the first mismatch) or ("n/a", why) over the dtypes: n/a when
    the property does not apply to the target (a detector raises NotApplicable), or when every
    call it would make uses what the target declares unsupported."""
    for name in dtypes:
        subject = Subject(target, DTYPES[name], seed, depth)
        try:
            detector.check(subject)
        except VarlenMismatch as mismatch:
            return "fail", f"{name}: {mismatch}"
        except NotApplicable as why:
            return "n/a", str(why)
        if vacuous(subject):
            return "n/a", f"{name}: {vacuous(subject)}"
    return "pass", None


def vacuous(subject):
    """Why a detector that returned without a call judged nothing (what it needs was set
    aside or taken out), or None when it made a call or the target declares nothing."""
    if subject.calls or not getattr(subject.target, "unsupported", ()):
        return None
    return ("it made no call: every case it needs uses what the target declares unsupported "
            f"({', '.join(subject.target.unsupported)})")


def check(detector, target, dtypes=("float64", "float32"), seed=0, depth="standard"):
    """None when the detector's property holds at every dtype (or does not apply to the
    target, see :func:`verdict`), else the first mismatch."""
    outcome, message = verdict(detector, target, dtypes, seed, depth)
    return message if outcome == "fail" else None


# -- derived cases: the other side of each metamorphic relation ---------------------------------


def owned(case):
    """The token rows that belong to a sequence (guard rows past cu_seqlens_q[-1] do not)."""
    return slice(0, sum(case.lens_q))


def visible(sq, sk, causal, window_size, alignment="bottom-right"):
    """(sq, sk) bool: which keys each query sees, by V3 and V4 under the declared alignment."""
    d = torch.arange(sq)[:, None] + (sk - sq if alignment == "bottom-right" else 0)
    j = torch.arange(sk)[None, :]
    wl, wr = window_size
    keep = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        keep &= j <= d
    if wl >= 0:
        keep &= j >= d - wl
    if wr >= 0:
        keep &= j <= d + wr
    return keep


def empty_rows(case, alignment="bottom-right"):
    """(total_q,) bool: owned rows that see no key."""
    empty = torch.zeros(case.q.shape[0], dtype=torch.bool)
    start = 0
    for sq, sk in zip(case.lens_q, case.lens_k):
        keep = visible(sq, sk, case.args["causal"], case.args["window_size"], alignment)
        empty[start:start + sq] = ~keep.any(dim=1) if sk else True
        start += sq
    return empty


def sequence_keys(case, b):
    """Sequence b's used keys and values, (sk, Hk, D) and (sk, Hk, Dv), packed or paged."""
    return keys_of(case.k, case.v, b, case.lens_k[b], case.args.get("cu_seqlens_k"),
                   case.args.get("block_table"))


def key_slices(case, alignment="bottom-right"):
    """Every owned query alone, a sequence of one, with exactly the keys it may see and no mask:
    the case's window and causal mask written as a key slice (the window's contiguous range)."""
    qs, ks, vs, lens = [], [], [], []
    start = 0
    for b, (sq, sk) in enumerate(zip(case.lens_q, case.lens_k)):
        kb, vb = sequence_keys(case, b)
        keep = visible(sq, sk, case.args["causal"], case.args["window_size"], alignment)
        for i in range(sq):
            seen = keep[i].nonzero().flatten()
            lo, hi = (int(seen[0]), int(seen[-1]) + 1) if len(seen) else (0, 0)
            qs.append(case.q[start + i:start + i + 1])
            ks.append(kb[lo:hi])
            vs.append(vb[lo:hi])
            lens.append(hi - lo)
        start += sq
    n = len(qs)
    args = {a: x for a, x in case.args.items() if a not in ("block_table", "seqused_k")}
    args.update(cu_seqlens_q=i32(range(n + 1)), cu_seqlens_k=cumulative(lens), max_seqlen_q=1,
                max_seqlen_k=max(lens, default=0), causal=False, window_size=(-1, -1))
    return replace(case, name=case.name + " (each query alone with its visible keys)",
                   q=torch.cat(qs), k=torch.cat(ks), v=torch.cat(vs), args=args,
                   lens_q=(1,) * n, lens_k=tuple(lens))


def last_rows(case, n):
    """The last n queries of every sequence (fewer where it has fewer) against all its keys:
    decode (n = 1) and chunked prefill after a prefill of the same sequences."""
    cu = [int(x) for x in case.args["cu_seqlens_q"]]
    take = [min(n, cu[b + 1] - cu[b]) for b in range(case.B)]
    rows = torch.cat([torch.arange(cu[b + 1] - t, cu[b + 1]) for b, t in enumerate(take)])
    chunk = replace(case, name=f"{case.name} (last {n} queries of each sequence)",
                    q=case.q[rows], lens_q=tuple(take),
                    args=dict(case.args, cu_seqlens_q=cumulative(take), max_seqlen_q=max(take)))
    return chunk, rows


def halves(case):
    """Two cases with the first and the second half of every sequence's keys, packed."""
    parts = []
    for first in (True, False):
        ks, vs, lens = [], [], []
        for b, n in enumerate(case.lens_k):
            kb, vb = sequence_keys(case, b)
            cut = slice(0, n // 2) if first else slice(n // 2, n)
            ks.append(kb[cut])
            vs.append(vb[cut])
            lens.append(len(kb[cut]))
        args = {a: x for a, x in case.args.items() if a not in ("block_table", "seqused_k")}
        args.update(cu_seqlens_k=cumulative(lens), max_seqlen_k=max(lens, default=0))
        parts.append(replace(case, name=f"{case.name} ({'first' if first else 'second'} half "
                             "of the keys)", k=torch.cat(ks), v=torch.cat(vs), args=args,
                             lens_k=tuple(lens)))
    return parts


def repeated_heads(case):
    """The GQA case with every key/value head repeated for the query heads that read it."""
    Hq, Hk = case.heads
    return case.with_(case.name + " (key/value heads repeated to one per query head)",
                      k=case.k.repeat_interleave(Hq // Hk, dim=-2),
                      v=case.v.repeat_interleave(Hq // Hk, dim=-2))


def max_score(case):
    """The largest |scale·q·k| over the case's used keys (what a cap must stay far above)."""
    top, start = 0.0, 0
    scale = case.args.get("softmax_scale") or case.q.shape[-1] ** -0.5
    Hq, Hk = case.heads
    for b, sq in enumerate(case.lens_q):
        kb, _ = sequence_keys(case, b)
        if sq and len(kb):
            qb = case.q[start:start + sq].detach().double()
            kb = kb.detach().double().repeat_interleave(Hq // Hk, dim=1)
            top = max(top, float(torch.einsum("qhd,khd->hqk", qb, kb).abs().max()) * scale)
        start += sq
    return top
