"""The input space of each contract, as data: every argument's axes and the values that matter.

Beside the clauses (this package's docstring): what a caller may send, written as axes of
values. ``attnzoo coverage`` reads every call the detectors send and says, per value, which
detectors reach it in the forward pass and which through gradients; a value no relation reaches
must say why here (``gap``), or the coverage test fails. Values of one axis may overlap (a
length can be prime and one past a power of two); each says what is special about it.
Sizes are those where kernels break: 1, small primes, both sides of a power of two (tile and
vector widths), and the scale deployed models run at. Nothing here is code the reference runs.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Value:
    name: str
    about: str
    gap: str = ""  # why no forward relation reaches it yet ("" when one must)
    no_gradient: str = ""  # why no gradient relation reaches it ("" when one must)


@dataclass(frozen=True)
class Axis:
    name: str
    clause: str
    about: str
    values: tuple = field(default_factory=tuple)


# Facts of the float formats the contract accepts: the last integer each holds exactly
# (2 ** significand bits; positions past it round together) and its largest finite value.
EXACT_INTEGERS = {"bfloat16": 256, "float16": 2048, "float32": 2 ** 24, "float64": 2 ** 53}
LARGEST_FINITE = {"bfloat16": 3.3895e38, "float16": 65504.0, "float32": 3.4028e38,
                  "float64": 1.7977e308}
SMALLEST_NORMAL = {"bfloat16": 1.1755e-38, "float16": 6.1035e-05, "float32": 1.1755e-38,
                   "float64": 2.2251e-308}
NO_AUTOGRAD = "a call without autograd (the lesson contract has no backward; S6 is SDPA's)"
SIZES = (
    Value("1", "a single element: squeeze, broadcasting and empty-reduction mistakes"),
    Value("prime", "a prime above 2: no power-of-two tiling divides it"),
    Value("2^k", "a power of two of 8 or more: exactly a whole number of tiles or lanes"),
    Value("2^k+1", "one past a power of two of 8 or more: a tail tile of one"),
    Value("2^k-1", "one short of a power of two of 8 or more: a partial last tile"),
    Value(">64", "more than one 64-wide tile"),
)
LONG = Value(">1024", "deployed long-context scale (more than 1024 positions)",
             gap="the deep tier stops at 1024 tokens on 2 cores; kernels' long-context paths "
                 "are left to a GPU run (attnzoo gpu)",
             no_gradient="as its forward")
WIDE = Value(">128", "a head wider than 128 (kernels specialise at 64, 128 and 256)")

SDPA = (
    Axis("L", "S1", "query length", SIZES + (LONG,)),
    Axis("S", "S1", "key length", SIZES + (LONG,)),
    Axis("E", "S3", "query/key head size", SIZES[:5] + (WIDE,)),
    Axis("Ev", "S3", "value head size", (
        Value("=E", "the value head as wide as the query's"),
        Value("!=E", "a value head of another width"),
        WIDE)),
    Axis("batch", "S1", "leading batch axes", (
        Value("unbatched", "fewer than four axes, as torch accepts"),
        Value("1", "a batch of one"),
        Value(">1", "several items"),
        Value("rank5", "two batch axes"),
        Value(">65535 slices", "more (batch, head) slices than a GPU grid axis holds (65535), "
              "one token each: a large decode batch"))),
    Axis("heads", "S4", "query heads", (
        Value("1", "one head"),
        Value(">1", "several heads"),
        Value(">=16", "deployed head counts"))),
    Axis("gqa", "S4", "grouped-query attention", (
        Value("off", "as many key/value heads as query heads"),
        Value("g=2", "two query heads per key/value head"),
        Value("g>=4", "four or more query heads per key/value head"),
        Value("mqa", "one key/value head for every query head"))),
    Axis("dtype", "C6", "the inputs' floating-point format", (
        Value("float64", "float64 inputs"),
        Value("float32", "float32 inputs", no_gradient="gradients are judged at float64 "
              "(correct_gradients) and at float16 and bfloat16, where a backward's rounding "
              "shows (low_precision_gradients); no relation judges a float32 backward yet: "
              "at float32 the order of a kernel's sums, not the storing of P and dS, sets its "
              "error, and 3x the float32 reference's error (the half-precision rule) flags "
              "the gradients of correct tiled kernels on wide heads"),
        Value("float16", "float16 inputs"),
        Value("bfloat16", "bfloat16 inputs"))),
    Axis("layout", "C7", "how the arrays lie in memory", (
        Value("contiguous", "row-major, no gaps"),
        Value("transposed", "a non-contiguous view (heads transposed, as after a split)"),
        Value("offset", "a slice at a nonzero storage offset (q, k, v cut from one packed "
              "projection, a window of a wider cache)"),
        Value("expanded", "stride 0 along axes the values do not change on (a key/value prefix "
              "shared by the batch, a mask expanded from (1, 1, L, S))"))),
    Axis("attn_mask", "S1", "the mask argument", (
        Value("none", "no mask"),
        Value("bool", "a boolean mask"),
        Value("float", "an additive float mask"),
        Value("float -inf", "a float mask with -inf entries"),
        Value("2-D", "one (L, S) mask broadcast over batch and heads"),
        Value("per-head", "a mask that differs between heads"),
        Value("empty row", "a query row with no allowed key"))),
    Axis("is_causal", "S2", "causal masking", (
        Value("off", "no causal mask"),
        Value("L=S", "square"),
        Value("L<S", "fewer queries than keys (decode, chunked prefill)"),
        Value("L>S", "more queries than keys"))),
    Axis("scale", "S3", "the scale argument", (
        Value("default", "1/√E"),
        Value("explicit", "a scale given"),
        Value("0", "scale=0: uniform weights"))),
    Axis("dropout_p", "S5", "the dropout probability", (
        Value("0", "no dropout"),
        Value("(0,1)", "some weights dropped"),
        Value(">=0.9", "most weights dropped"),
        Value("1", "every weight dropped"))),
    Axis("scores", "C3", "score magnitudes", (
        Value("ordinary", "scores of order 1"),
        Value("peaked", "large scores: nearly one-hot rows"),
        Value("flat", "tiny scores: nearly uniform rows"),
        Value("past float16", "raw q·k beyond float16's largest finite (65504) before scaling"))),
    Axis("limits", "C6", "the limits of the inputs' float format", (
        Value("largest finite", "entries within a factor 4 of the format's largest finite value "
              "(float16: 65504), where a sum kept in that format overflows",
              no_gradient="gradients at float16 are judged at ordinary magnitudes "
              "(low_precision_gradients); no relation asks for them with V near 65504 yet"),
        Value("smallest normal", "nonzero entries below the format's smallest normal value "
              "(subnormals)", gap="whether subnormals are kept or flushed to zero is the "
              "hardware's mode (CUDA's fast math flushes them), not the contract's: no "
              "relation may demand either", no_gradient="as its forward"),
        Value("past exact integers", "lengths past the last integer the format holds exactly "
              "(bfloat16: 256, float16: 2048), where positions made in it round together"))),
    Axis("requests", "C7", "what a caller does with a call and around it", (
        Value("repeated", "the same call again, right after itself, with new objects of equal "
              "values"),
        Value("repeated later", "the same call again with other calls between"),
        Value("refilled", "the same argument objects as an earlier call, refilled in place with "
              "new values", no_gradient="refilling is judged on answers; a backward after its "
              "inputs were refilled is refused by autograd's version counter"),
        Value("answer overwritten", "the caller wrote into an earlier answer before calling "
              "again", no_gradient="writing into an answer that a backward still needs is "
              "refused by autograd's version counter"),
        Value("seeded", "the random state set before the call"),
        Value("not reseeded", "a dropout call without a reseed: it draws where the last call "
              "left the random state, as a training loop's steps do"),
        Value("another call before the backward", "a second call of the same attention made "
              "after a forward and before its backward, as a model's next layer is",
              gap="a call between a forward and its backward is a matter of the backward: a "
              "forward alone has none"),
        Value("kept", "the answer kept and read again after later calls",
              no_gradient="reading an answer again needs no backward"),
        Value("inputs read back", "the arguments read back after the call, and after its "
              "backward"))),
)
LESSON = (
    Axis("T", "C3", "sequence lengths T_q and T_k", SIZES[:1] + (
        Value("small", "2 to 16 tokens"),
        Value(">64", "more than one 64-wide tile"))),
    Axis("d", "C3", "head sizes d_k and d_v", (
        Value("1", "one feature"),
        Value("d_k!=d_v", "value rows of another width"))),
    Axis("rank", "C3", "leading axes", (
        Value("2-D", "(T, d) arrays"),
        Value("batched", "three or more axes"))),
    Axis("dtype", "C6", "the inputs' floating-point format", tuple(
        Value(d, f"{d} inputs") for d in ("float64", "float32", "float16"))),
    Axis("mask", "C3", "the mask argument", (
        Value("none", "no mask"),
        Value("bool", "a boolean mask"),
        Value("empty row", "a query row with no allowed key"))),
    Axis("function", "C1", "the lesson's four functions", tuple(
        Value(f, f"{f}(…)") for f in ("causal_mask", "softmax", "attention",
                                      "causal_self_attention"))),
)


def _varlen(name, clause, about, *values):
    """An axis of the varlen space; a value is ``(name, what)``, or ``(name, what, reasons)``
    with the reasons (``gap``, ``no_gradient``) nothing reaches it."""
    return Axis(name, clause, about, tuple(Value(v[0], v[1], **(v[2] if len(v) > 2 else {}))
                                           for v in values))


VARLEN = (
    _varlen("sequences", "V1", "how many sequences are packed, and which",
        ("1", "one sequence: the dense contract, packed"),
        ("several", "several sequences of unequal lengths: offsets must not leak across them"),
        ("empty", "a sequence with no tokens: two equal cu_seqlens entries"),
        ("one token", "a sequence of one query and one key")),
    _varlen("lengths", "V3", "a sequence's query count sq against its key count sk",
        ("sq<sk", "fewer queries than keys: decode (sq = 1) and chunked prefill"),
        ("sq=sk", "as many queries as keys: prefill"),
        ("sq>sk", "more queries than keys: the first rows see no key under causal"),
        ("sk=0", "queries and no key: every row empty")),
    _varlen("paging", "V2", "where the keys lie",
        ("packed", "no block table: keys packed like the queries"),
        ("in order", "paged, blocks in the order of the sequence"),
        ("permuted", "paged, blocks in a shuffled physical order"),
        ("shared", "one physical block in two sequences' tables (a shared prefix)"),
        ("page of 1", "a block size of one key"),
        ("partial last page", "the last block of a sequence only partly used")),
    _varlen("seqused_k", "V2", "keys used out of those allocated",
        ("none", "every allocated key used"),
        ("below allocated", "fewer keys used than allocated: the rest must not be read"),
        ("0", "no key used")),
    _varlen("window", "V4", "window_size (wl, wr)",
        ("none", "(-1, -1): unbounded both sides"),
        ("left", "(wl, -1): a left window only (HF's sliding_window W is (W-1, 0))"),
        ("right", "(-1, wr): a right window only"),
        ("both", "(wl, wr): bounded both sides"),
        ("wider than sequence", "a window that hides no key: the off-by-one bugs do not show"),
        ("0", "(0, 0): only the key on the diagonal")),
    _varlen("softcap", "V5", "softcap",
        ("0", "no cap"),
        ("small", "a cap the scores reach: tanh bends them"),
        ("far above", "a cap far above every score: nearly the identity")),
    _varlen("alibi", "V6", "alibi_slopes",
        ("none", "no bias"),
        ("per head", "slopes (Hq,)"),
        ("per batch and head", "slopes (B, Hq): a sequence must use its own row")),
    _varlen("gqa", "V7", "query heads per key/value head",
        ("off", "Hq = Hk"),
        ("g=2", "two query heads per key/value head"),
        ("mqa", "one key/value head for every query head")),
    _varlen("head sizes", "V5", "D and Dv",
        ("Dv=D", "the value head as wide as the query's"),
        ("Dv!=D", "a value head of another width"),
        (">128", "a head wider than 128 (kernels specialise at 64, 128 and 256)")),
    _varlen("dtype", "V11", "the inputs' floating-point format",
        *((d, f"{d} inputs") for d in ("float64", "float32", "float16", "bfloat16"))),
    _varlen("causal", "V3", "causal masking",
        ("off", "no causal mask"),
        ("on", "bottom-right causal mask, per sequence")),
    _varlen("guard rows", "V9", "rows of q past cu_seqlens_q[-1]",
        ("none", "total_q = cu_seqlens_q[-1]"),
        ("past the end", "rows past the last sequence: never written, never read")),
    _varlen("score size", "V5", "the largest score a softmax exponentiates, after the cap",
        ("ordinary", "every score within float32's exp range (|s| <= 88.7)"),
        ("past exp's range", "a score past float32's exp range, no cap to bound it: a softmax "
         "that does not subtract its row's maximum overflows")),
    _varlen("layout", "V12", "how q, k and v lie in memory, their values the same",
        ("contiguous", "each a contiguous tensor of its own"),
        ("at an offset", "contiguous rows sliced from a larger buffer: a storage offset"),
        ("head-major", "stored head by head, the token axis strided by D (a model's "
         "transpose(1, 2); FlashInfer's HND cache)"),
        ("fused buffers", "q from a fused projection's rows, k and v interleaved in one cache: "
         "strides past their own width, v at an offset")),
    _varlen("return_lse", "V10", "whether the LSE is returned",
        ("off", "the output only"),
        ("on", "(out, lse), lse (Hq, total_q)",
         {"no_gradient": "the LSE carries no gradient: flash-attention's softmax_lse is not "
          "differentiated, and gradients_match_reference differentiates the output"})),
)
SPACES = {"sdpa": SDPA, "lesson": LESSON, "varlen": VARLEN}
# Why a contract has no gradient relations at all ("" where every value needs one).
BACKWARD = {"sdpa": "", "lesson": NO_AUTOGRAD,
            "varlen": ""}
