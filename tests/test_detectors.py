"""Every detector alone: it flags a hand-made wrong case with the right message, and passes the
reference.

Each wrong case below is a few lines, wrong in exactly the way one detector's property forbids
(the kill matrix in test_kill_matrix.py runs the zoo; these are independent of it). A message
must follow the envelope ``[detector] expected …, got … [call]`` and name what was found, and
the evidence must carry a snippet that compiles. The last tests pin how the harness turns what
an implementation (or a detector) does into a verdict.
"""

import math
import re
import signal
import time
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target
from detectors import all_detectors, baseline_suites, by_name
from detectors.kit.battery import Battery
from detectors.kit.subject import Subject
from reference import lesson_numpy, lesson_torch
from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from reference.sdpa import ScaledDotProductAttention, scaled_dot_product_attention

DETECTORS = by_name()
NAMES = [d.NAME for d in all_detectors() + baseline_suites()]


@pytest.fixture(scope="module")
def battery():
    return Battery(0)


def subject(impl, name, contract="lesson", backend=None, call_seconds=None):
    """A Subject running ``impl`` in this process under a made-up locator."""
    if backend is None:
        backend = "torch" if contract == "sdpa" or isinstance(impl, LessonTorch) else "numpy"
    target = Target(f"wrong/{name}", f"tests/test_detectors.py:{name}", contract, backend)
    kw = {} if call_seconds is None else {"call_seconds": call_seconds}
    return Subject(target, InProcess(target, obj=impl, **kw))


ENVELOPES = (
    r"expected .+, got .+",  # the implementation against a known answer
    r".+ = \S+, .+ = \S+, should be equal \((± \S+|exactly)(; .+)?\)",  # two of its outputs
    r"\S+ inputs computed to \S+ accuracy: error \S+, \S+ allows \S+ \(.+, difference \S+\)",
)


def assert_envelope(finding, detector, call):
    """``[detector] expected …, got … [call…]`` — or, for a relation between two outputs,
    ``[detector] f(x)[i] = …, f(x′)[i] = …, should be equal (…) [call…]`` — with a snippet that
    compiles; neither output of a relation is called expected."""
    message = finding.message
    head = f"[{detector}] "
    assert message.startswith(head), message
    tail = message[message.rindex(" ["):]  # the call is the last bracketed part
    body = message[len(head):-len(tail)]
    assert any(re.fullmatch(e, body) for e in ENVELOPES), message
    assert tail.endswith("]") and call in tail, message
    assert finding.evidence is not None and finding.evidence.snippet, message
    compile(finding.evidence.snippet, "<snippet>", "exec")


# -- hand-made wrong implementations, one (or two) per detector ---------------------------------


def masked_scores(Q, K, mask, scale):
    """Scaled, masked scores as the NumPy reference computes them (for the bodies below)."""
    scores = Q @ np.swapaxes(K, -1, -2) * scale
    return scores if mask is None else np.where(mask, scores, -np.inf)


class NoScaling(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        weights = self.softmax(masked_scores(Q, K, mask, 1.0))  # WRONG: never divided by √d_k
        return weights @ V, weights


class DividedByDk(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / Q.shape[-1]  # WRONG: divided by d_k, not √d_k
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))
        weights = self.softmax(scores)
        return weights @ V, weights


class PromotesToFloat64(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        # WRONG: np.sqrt(int) is an np.float64 scalar, which promotes float32 scores to float64
        weights = self.softmax(masked_scores(Q, K, mask, 1 / np.sqrt(Q.shape[-1])))
        return weights @ V, weights


class WeightsBeforeMask(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        out, _ = super().attention(Q, K, V, mask)
        return out, super().attention(Q, K, V)[1]  # WRONG: returns the unmasked weights


class MaskAfterSoftmax(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        weights = self.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]))
        if mask is not None:
            weights = weights * mask  # WRONG: masked after softmax, so rows no longer sum to 1
        return weights @ V, weights


class LargeNegativeFill(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        scores = masked_scores(Q, K, None, 1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = np.where(mask, scores, -1e9)  # WRONG: a row with no allowed key spreads 1/S
        weights = self.softmax(scores)
        return weights @ V, weights


class AdditiveLargeNegative(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        scores = masked_scores(Q, K, None, 1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = scores + np.where(mask, 0.0, -1e9)  # WRONG: a key scoring 1e12 beats -1e9
        weights = self.softmax(scores)
        return weights @ V, weights


class FirstItemMask(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        if mask is not None and mask.ndim >= 3:
            mask = mask[:1]  # WRONG: every batch item gets item 0's mask
        return super().attention(Q, K, V, mask)


class AlwaysCausal(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        causal = np.tril(np.ones((Q.shape[-2], K.shape[-2]), dtype=bool))
        # WRONG: a causal mask on every call, asked for or not: positions now matter
        return super().attention(Q, K, V, causal if mask is None else mask & causal)


class ScaledBySequenceLength(LessonNumpy):
    def causal_self_attention(self, X, W_q, W_k, W_v):
        T = X.shape[-2]
        # WRONG: divided by √T (the number of tokens), not √d_k, so a prefix scores differently
        scores = masked_scores(X @ W_q, X @ W_k, self.causal_mask(T), 1 / math.sqrt(T))
        weights = self.softmax(scores)
        return weights @ (X @ W_v), weights


class InvertedMask(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        return super().attention(Q, K, V, None if mask is None else ~mask)  # WRONG: True = blocked


class SoftmaxWithoutMax(LessonNumpy):
    def softmax(self, x):
        e = np.exp(x)  # WRONG: no max subtracted: exp(1000) = inf and inf / inf = NaN
        return e / e.sum(axis=-1, keepdims=True)


class MaskOneTooWide(LessonNumpy):
    def causal_mask(self, T):
        return np.tril(np.ones((T, T), dtype=bool), k=1)  # WRONG: token i also sees token i + 1


class NaiveSoftmax(LessonNumpy):
    def softmax(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))  # WRONG: a row of -inf gives -inf + inf = NaN
        return e / e.sum(axis=-1, keepdims=True)


class ComputesInHalf(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        half = (a.astype(np.float16) for a in (Q, K, V))  # WRONG: float16 "for speed"
        out, weights = super().attention(*half, mask)
        return out.astype(Q.dtype), weights.astype(Q.dtype)


class MaskCachedByFirstCall(LessonNumpy):
    def causal_mask(self, T):
        if "_mask" not in self.__dict__ or len(self._mask) < T:
            self._mask = super().causal_mask(T)
        return self._mask[-T:, :T]  # WRONG: after a longer call the last T rows look ahead


class SoftmaxInPlace(LessonNumpy):
    def softmax(self, x):
        x -= x.max(axis=-1, keepdims=True)  # WRONG: shifts the caller's array in place
        return super().softmax(x)


class SoftmaxOverQueries(LessonTorch):
    def softmax(self, x):
        return super().softmax(x.transpose(-2, -1)).transpose(-2, -1)  # WRONG: over the query axis


class DetachedNormaliser(LessonTorch):
    def softmax(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True).detach()  # WRONG: backward sees a constant sum


class UpperTriangleMaskTorch(LessonTorch):
    def causal_mask(self, T):
        return torch.ones(T, T, dtype=torch.bool).triu()  # WRONG: token i sees j >= i, the future


class UpperTriangleMask(LessonNumpy):
    def causal_mask(self, T):
        return np.triu(np.ones((T, T), dtype=bool))  # WRONG: token i sees j >= i, the future


class BottomRightCausal(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        bias = super().bias(attn_mask, False, L, S, query)
        if is_causal:  # WRONG: bottom-right (j <= i + S - L), but the target declares top-left
            keep = torch.ones(L, S, dtype=torch.bool).tril(S - L)
            bias = bias.masked_fill(~keep, float("-inf"))
        return bias


class GqaRepeat(ScaledDotProductAttention):
    def share_kv_heads(self, query, key, value):
        g = query.shape[-3] // key.shape[-3]
        # WRONG: repeat tiles heads 0, 1, 2, 0, 1, 2: query head h reads h % H_kv, not h // g
        return key.repeat(1, g, 1, 1), value.repeat(1, g, 1, 1)


class FloatMaskAsBool(ScaledDotProductAttention):
    def bias(self, attn_mask, is_causal, L, S, query):
        if attn_mask is not None:
            attn_mask = attn_mask.bool()  # WRONG: a float mask read as bool: 0.0 means blocked
        return super().bias(attn_mask, is_causal, L, S, query)


class ScaledByValueWidth(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        if scale is None:
            scale = 1 / math.sqrt(value.shape[-1])  # WRONG: the value width Ev, not E
        return super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                enable_gqa)


class SoftmaxAcrossHeads(ScaledDotProductAttention):
    def softmax(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=(-3, -1), keepdim=True)  # WRONG: one normaliser shared by all heads


class DropoutLeftOn(ScaledDotProductAttention):
    def softmax(self, x):
        return F.dropout(super().softmax(x), 0.1)  # WRONG: F.dropout trains by default


class QueryDetached(ScaledDotProductAttention):
    def __call__(self, query, *args, **kwargs):
        return super().__call__(query.detach(), *args, **kwargs)  # WRONG: no gradient reaches query


class MaskDetached(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, *args, **kwargs):
        if attn_mask is not None:
            attn_mask = attn_mask.detach()  # WRONG: no gradient reaches a float mask
        return super().__call__(query, key, value, attn_mask, *args, **kwargs)


def dropout_not_rescaled(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                         scale=None, enable_gqa=False):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    if dropout_p > 0:
        weights = weights * (torch.rand_like(weights) >= dropout_p)  # WRONG: no 1 / (1 - p)
    return weights @ value


class _OrderedSum(torch.autograd.Function):
    """Identity forward; the backward adds and removes a call-dependent term, as a reduction
    whose order changes from call to call rounds differently."""

    @staticmethod
    def forward(ctx, out, turn):
        ctx.turn = turn
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        t = grad * (ctx.turn % 3 + 1) / 3
        return (grad + t) - t, None  # WRONG: the rounding depends on the call


class BackwardOrderChanges(LessonTorch):
    calls = 0

    def attention(self, Q, K, V, mask=None):
        out, weights = super().attention(Q, K, V, mask)
        self.calls += 1
        return _OrderedSum.apply(out, self.calls), weights


class _WeightedByLast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weights, V, owner):
        owner.saved, ctx.owner = (weights.detach(), V.detach()), owner  # WRONG: on the owner
        return weights @ V

    @staticmethod
    def backward(ctx, grad):
        weights, V = ctx.owner.saved  # whatever the last forward left there
        return grad @ V.transpose(-2, -1), weights.transpose(-2, -1) @ grad, None


class BackwardFromLastForward(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        _, weights = super().attention(Q, K, V, mask)
        return _WeightedByLast.apply(weights, V, self), weights


class TorchSoftmax(LessonTorch):
    def softmax(self, x):
        return torch.softmax(x, dim=-1)  # WRONG: NaN on a row of -inf


class WeightsLeftInFloat32(LessonTorch):
    def attention(self, Q, K, V, mask=None):
        out, weights = super().attention(Q, K, V, mask)
        return out, weights.to(torch.promote_types(weights.dtype, torch.float32))  # WRONG


class SoftmaxIntoBuffer(LessonNumpy):
    buffer = np.empty(0)

    def softmax(self, x):
        out = super().softmax(x)
        if self.buffer.size < out.size:
            self.buffer = np.empty(out.size)
        view = self.buffer[:out.size].reshape(out.shape)
        view[...] = out
        return view  # WRONG: the next call writes into the same memory


class AttentionMemoisedById(LessonNumpy):
    last = None  # (Q, K, V, mask, answer): the objects of the last call, kept alive

    def attention(self, Q, K, V, mask=None):
        now = (Q, K, V, mask)
        if self.last is None or any(a is not b for a, b in zip(self.last, now)):
            self.last = now + (super().attention(Q, K, V, mask),)
        return self.last[4]  # WRONG: the same objects, whatever they hold now, same answer


class OutputAccumulatedInBuffer(LessonNumpy):
    buffers = None  # shape -> the output handed out last time

    def attention(self, Q, K, V, mask=None):
        out, weights = super().attention(Q, K, V, mask)
        buffers = self.__dict__.setdefault("buffers", {})
        buf = buffers.setdefault(out.shape, np.zeros(out.shape))
        buf *= 0.0  # WRONG: 0 * NaN is NaN: what the caller wrote survives
        buf += out
        return buf, weights


def dropout_shared_across_batch(query, key, value, attn_mask=None, dropout_p=0.0,
                                is_causal=False, scale=None, enable_gqa=False):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    if dropout_p > 0:
        keep = torch.rand(weights.shape[1:]) >= dropout_p  # WRONG: one mask for every item
        weights = weights * keep / (1 - dropout_p)
    return weights @ value



def dropout_nan_at_one(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                       scale=None, enable_gqa=False):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    if dropout_p > 0:
        keep = torch.rand_like(weights) >= dropout_p
        weights = weights.div(1 - dropout_p) * keep  # WRONG: inf · 0 = NaN at p = 1
    return weights @ value


def dropout_capped_at_0_9(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                          scale=None, enable_gqa=False):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    if 0 < dropout_p < 1:
        keep = torch.rand_like(weights) >= min(dropout_p, 0.9)  # WRONG: p = 0.99 keeps 10 %
        weights = weights * keep / (1 - dropout_p)
    return weights * (dropout_p < 1) @ value


def dropout_from_a_fixed_generator(query, key, value, attn_mask=None, dropout_p=0.0,
                                   is_causal=False, scale=None, enable_gqa=False):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    if dropout_p > 0:
        draw = torch.rand(weights.shape, generator=torch.Generator().manual_seed(7),
                          dtype=weights.dtype)  # WRONG: the same draw on every call
        weights = weights * (draw >= dropout_p) / (1 - dropout_p)
    return weights @ value


class DropoutFromItsOwnGenerator:
    """Draws from a generator of its own, which torch's seed never reaches."""

    def __init__(self):
        self.generator = torch.Generator().manual_seed(7)

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1)
        if dropout_p > 0:
            draw = torch.rand(weights.shape, generator=self.generator,  # WRONG: not torch's state
                              dtype=weights.dtype)
            weights = weights * (draw >= dropout_p) / (1 - dropout_p)
        return weights @ value


class _RedrawnInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weights, p):
        ctx.p = p
        return F.dropout(weights, p)

    @staticmethod
    def backward(ctx, grad):
        return F.dropout(grad, ctx.p), None  # WRONG: a new mask, not the forward's


class DropoutRedrawnInBackward(ScaledDotProductAttention):
    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)
        return _RedrawnInBackward.apply(weights, dropout_p) if dropout_p > 0 else weights


class _RescaledInBackward(torch.autograd.Function):
    """Identity on the output; the backward rescales the query it was handed, in place."""

    @staticmethod
    def forward(ctx, out, query):
        ctx.query = query
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.query.data.mul_(2.0)  # WRONG: the caller's query, written through its storage
        return grad, None


class QueryRescaledInBackward(ScaledDotProductAttention):
    def __call__(self, query, *args, **kwargs):
        return _RescaledInBackward.apply(super().__call__(query, *args, **kwargs), query)


@dataclass
class Wrong:
    detector: str
    impl: object  # a class (instantiated per test: some keep state) or an SDPA-style function
    verdict: str
    found: str  # a fragment of the message that shows the right thing was found
    call: str  # the call named in brackets at the end of the message
    contract: str = "lesson"
    relation: str = ""  # for relations: the comment the snippet ends with


WRONG = [
    Wrong("known_answers", NoScaling, "killed", "expected weights[0, 0] = 0.401112 (± 1e-10)",
          "attention(Q (3, 2) float64"),
    Wrong("causal_alignment", BottomRightCausal, "killed",
          "query row 0 to see keys {0} (top-left) (is_causal with L=1, S=6), got keys {0, 1, 2, 3, 4, 5}", "f(query",
          "sdpa", "is_causal with L=1, S=6"),
    Wrong("gqa_head_mapping", GqaRepeat, "killed",
          "query head 1 to read key/value head 0 (g = 3) (enable_gqa: kv head j serves heads j*g .. j*g+g-1), got output matching key/value head 1",
          "enable_gqa=True", "sdpa"),
    Wrong("matches_loop_oracle", DividedByDk, "killed", "expected out[", "attention(Q "),
    Wrong("dtype_follows_input", PromotesToFloat64, "killed",
          "expected out of dtype float32, got float64", "attention(Q (2, 3, 4) float32"),
    Wrong("output_is_weighted_values", WeightsBeforeMask, "killed",
          "(weights @ V)[0, 0, 0] = 0.525046, out[0, 0, 0] = -0.567232, should be equal",
          "bool)", relation="out should equal weights @ V"),
    Wrong("weights_are_distributions", MaskAfterSoftmax, "killed", "expected row sum[",
          "mask (1, 3, 4) bool"),
    Wrong("weights_are_distributions", LargeNegativeFill, "killed",
          "= 0 exactly (a forbidden key), got 0.2", "mask (2, 4, 5) bool"),
    Wrong("batch_consistency", FirstItemMask, "killed",
          "f(batch)[1][0, 0] = -1.00849, f(item 1)[0, 0] = 0, should be equal", "attention(Q ",
          relation="item 1 alone should equal item 1 of the batch"),
    Wrong("mask_forms_agree", FloatMaskAsBool, "killed",
          ", f(x, zero float mask)[0, 0, 0, 0] = 0, should be equal", "attn_mask", "sdpa",
          "a float mask of zeros should equal no mask"),
    Wrong("mask_forms_agree", InvertedMask, "killed",
          "f(x)[0, 0, 0] = 2.5, f(x, all-True mask)[0, 0, 0] = 0, should be equal", "attention(Q ",
          relation="an all-True mask should equal no mask"),
    Wrong("permutation_equivariance", AlwaysCausal, "killed",
          "f(x)[P][0, 0, 0] = 0.180541, f(x[P])[0, 0, 0] = 0.25, should be equal", "attention(Q ",
          relation="should permute rows"),
    Wrong("prefix_consistency", ScaledBySequenceLength, "killed",
          "f(X)[..., :2, :][1, 0] = 5.07658, f(X[..., :2, :])[1, 0] = 5.07811, should be equal",
          "causal_self_attention(X ",
          relation="the prefix of 2 tokens should reproduce the first 2 rows"),
    Wrong("scores_scaled_by_rsqrt_dk", ScaledByValueWidth, "killed",
          "f(x)[0, 0, 0, 0] = 0.0961832, f(x, d_k padded by 3)[0, 0, 0, 0] = 0.164313", "f(query",
          "sdpa", "zero-padding d_k by 3 and rescaling Q should change nothing"),
    Wrong("shift_invariance", SoftmaxWithoutMax, "nan",
          "softmax(x)[0] = 0.678758, softmax(x + c)[0] = nan, should be equal (± 1e-10; ",
          "softmax(x ",
          relation="shifting each row's scores (rows shifted by +1000, -1000, ...) should change nothing"),
    Wrong("causality", MaskOneTooWide, "killed", "f(X)[0, 0] = -3.31243, f(X with token 1 bumped)[0, 0] = -2.36893, should be equal (± 5.1e-10; they differ by 0.94; rows before token 1 must not change when token 1 is bumped)", "causal_self_attention(",
          relation="rows before token 1 must not change when token 1 is bumped"),
    Wrong("head_independence", SoftmaxAcrossHeads, "killed", "f(x with query head 0 changed)[0, 1, 0, 0] = 0.202241, should be equal (± 2.1e-10; they differ by 0.019; changing query head 0 should leave other heads unchanged)",
          "f(query", "sdpa", "changing query head 0 should leave other heads unchanged"),
    Wrong("mask_poisoning", AdditiveLargeNegative, "killed", "f(x)[0, 1, 0] = 0.0347729, f(x, forbidden keys poisoned)[0, 1, 0] = -0.425338, should be equal (± 1.4e-10; they differ by 0.46; keys and values no query may see were set to huge values)", "attention(Q ",
          relation="keys and values no query may see were set to huge values"),
    Wrong("queries_are_independent", SoftmaxOverQueries, "killed",
          "f(x with query 0 changed)[0, 1, 0] = 0.00827562, should be equal (± 2.5e-10; they differ by 0.01; changing query 0 should leave every other row unchanged)", "attention(Q ",
          relation="changing query 0 should leave every other row unchanged"),
    Wrong("dropout_is_inverted", dropout_not_rescaled, "killed", "(w / (1 - 0.5)) (with V = I the output is the dropped weights), got ",
          "dropout_p=0.5", "sdpa"),
    Wrong("empty_rows_are_zero", NaiveSoftmax, "nan", "expected out[0, 1, 0] finite, got nan",
          "mask (2, 4, 5) bool"),
    Wrong("low_precision_agreement", ComputesInHalf, "killed", "expected out[",
          "attention(Q (1, 3, 5) float32"),
    Wrong("computes_at_input_precision", ComputesInHalf, "killed",
          "float64 inputs computed to float16 accuracy: error ", "attention(Q "),
    Wrong("call_order_independence", MaskCachedByFirstCall, "killed", "1st f(x)[0, 0] = -3.3125, 2nd f(x)[0, 0] = -3.31234, should be equal (exactly; they differ by 0.00016; the same call, made before and after calls of other sizes)",
          "causal_self_attention(X ",
          relation="the same call, made before and after calls of other sizes"),
    Wrong("determinism", DropoutLeftOn, "killed", "should be equal (exactly; they differ by 0.8; the same call made twice)", "f(query", "sdpa",
          "the same call made twice"),
    Wrong("input_immutability", SoftmaxInPlace, "killed",
          "expected x left unchanged, got x modified by the call", "softmax(x (3,) float64"),
    Wrong("input_immutability", QueryRescaledInBackward, "killed",
          "expected query left unchanged (the arguments read back after the backward of "
          "sum(out * G)), got query modified by the call", "f(query", "sdpa"),
    Wrong("correct_gradients", DetachedNormaliser, "killed", "expected dQ[",
          "attention(Q (1, 3, 5) float64", relation="gradient of sum(out * G)"),
    Wrong("backward_determinism", BackwardOrderChanges, "killed",
          "should be equal (exactly; they differ by 5.6e-17; the same backward made twice)", "attention(Q",
          relation="the same backward made twice"),
    Wrong("backward_follows_its_forward", BackwardFromLastForward, "killed",
          "(gradient of sum(out * G), with another call made between the forward and its "
          "backward), got ", "attention(Q",
          relation="gradient of sum(out * G), with another call made between the forward and "
                   "its backward"),
    Wrong("correct_gradients", QueryDetached, "killed",
          "expected a gradient for query, got no gradient reached query", "f(query", "sdpa"),
    Wrong("gradients_of_every_input", MaskDetached, "killed",
          "expected a gradient for attn_mask (gradient of sum(out * G), a float mask's summed over "
          "the axes it broadcasts along), got no gradient reached attn_mask", "f(query", "sdpa",
          "a float mask's summed over the axes it broadcasts along"),
    Wrong("softmax_of_empty_row_is_zero", TorchSoftmax, "nan",
          "expected softmax[0] finite, got nan", "softmax(x (3,) float64"),
    Wrong("dtype_follows_input", WeightsLeftInFloat32, "killed",
          "expected weights of dtype float16, got float32", "attention(Q (2, 3, 4) float16"),
    Wrong("dropout_pattern_is_independent", dropout_shared_across_batch, "killed",
          "expected patterns of different batch items to agree on at most 0.5 + ", "f(query",
          "sdpa", "with V = I the output is the dropped weights (p=0.5)"),
    Wrong("dropout_across_rates", dropout_nan_at_one, "nan",
          "expected out[0, 0, 0, 0] finite (dropout_p=1 drops every weight), got nan", "f(query",
          "sdpa", "dropout_p=1 drops every weight"),
    Wrong("dropout_across_rates", dropout_capped_at_0_9, "killed",
          "expected a share of 0.01 kept, within [", "f(query", "sdpa",
          "with V = I the output is the dropped weights (p=0.99)"),
    Wrong("dropout_follows_the_seed", dropout_from_a_fixed_generator, "killed",
          "expected patterns of two calls in a row to agree on at most 0.5 + ", "f(query", "sdpa",
          "two calls without reseeding draw independent patterns"),
    Wrong("dropout_follows_the_seed", DropoutFromItsOwnGenerator, "killed",
          "f(x) after reseeding", "f(query", "sdpa", "a reseed to the same value repeats the call"),
    Wrong("dropout_backward_uses_forward_mask", DropoutRedrawnInBackward, "killed",
          "expected dquery[", "f(query", "sdpa",
          "the gradient of sum(out * G) with the forward's mask, p = 0.5"),
    Wrong("answers_stay_as_returned", SoftmaxIntoBuffer, "killed",
          "returned weights[0, 0, 0, 0, 0] = 0.498718, later weights[0, 0, 0, 0, 0] = 1, ",
          "attention(Q ",
          relation="the answer as returned, read again after later calls of other shapes"),
    Wrong("answers_follow_values", AttentionMemoisedById, "killed",
          "f(new objects)[0, 0, 0] = ", "attention(Q (2, 3, 4) float64",
          relation="the same input objects refilled in place with new values, against new objects"),
    Wrong("answers_follow_values", OutputAccumulatedInBuffer, "nan",
          "f(x) after the write[0, 0, 0] = nan, should be equal", "attention(Q ",
          relation="the same input objects again, after the caller wrote NaN into the answer "
                   "returned"),
    Wrong("allclose_vs_sdpa", UpperTriangleMaskTorch, "killed",
          "F.scaled_dot_product_attention(is_causal=True)'s output, got a different output",
          "causal_self_attention(X (2, 4, 8)"),
    Wrong("lesson_checks", UpperTriangleMask, "killed",
          "causal_mask(3) as printed in the lesson, got [[True, True, True]", "causal_mask(T=3)"),
]


class _UpstreamInFloat8(torch.autograd.Function):
    """Identity forward; the backward keeps the upstream gradient in float8 to save memory."""

    @staticmethod
    def forward(ctx, out):
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        if grad.dtype in (torch.float16, torch.bfloat16):
            return grad.to(torch.float8_e4m3fn).to(grad.dtype)  # WRONG: 4 significant bits
        return grad


class Float8Backward(ScaledDotProductAttention):
    def __call__(self, *args, **kwargs):
        return _UpstreamInFloat8.apply(super().__call__(*args, **kwargs))


WRONG_AT_STANDARD = [  # properties checked at realistic sizes only
    Wrong("low_precision_gradients", Float8Backward, "killed", "(gradient of sum(out * G) at "
          "float16, within 3x the reference's error at float16), got ", "f(query", "sdpa",
          "within 3x the reference's error at float16"),
]


def wrong_id(case):
    return f"{case.detector}-{getattr(case.impl, '__name__', type(case.impl).__name__)}"


def test_every_detector_and_baseline_has_a_wrong_case():
    assert sorted({w.detector for w in WRONG + WRONG_AT_STANDARD}) == sorted(NAMES)


@pytest.mark.parametrize("case", WRONG, ids=[wrong_id(w) for w in WRONG])
def test_detector_flags_its_wrong_case(case, battery):
    impl = case.impl() if isinstance(case.impl, type) else case.impl
    finding = run(DETECTORS[case.detector], subject(impl, wrong_id(case), case.contract), battery)
    assert finding.verdict == case.verdict, finding.message
    assert_envelope(finding, case.detector, case.call)
    assert case.found in finding.message, finding.message
    if case.relation:  # which relation failed is told by the snippet's last line
        assert finding.evidence.snippet.endswith(case.relation), finding.evidence.snippet


@pytest.mark.parametrize("case", WRONG_AT_STANDARD, ids=[wrong_id(w) for w in WRONG_AT_STANDARD])
def test_detector_flags_its_wrong_case_at_standard(case):
    test_detector_flags_its_wrong_case(case, Battery(0, 1, "standard"))


# -- the reference passes every detector ---------------------------------------------------------

REFERENCES = {
    "numpy": (lesson_numpy, "lesson", "numpy"),
    "torch": (lesson_torch, "lesson", "torch"),
    "sdpa": (scaled_dot_product_attention, "sdpa", "torch"),
}
NOT_APPLICABLE = {  # (detector, reference) -> why it does not apply
    ("causal_alignment", "numpy"): "is_causal is an SDPA argument",
    ("causal_alignment", "torch"): "is_causal is an SDPA argument",
    ("gqa_head_mapping", "numpy"): "grouped-query attention is an SDPA argument",
    ("gqa_head_mapping", "torch"): "grouped-query attention is an SDPA argument",
    ("dropout_is_inverted", "numpy"): "dropout is an SDPA argument",
    ("dropout_is_inverted", "torch"): "dropout is an SDPA argument",
    ("correct_gradients", "numpy"): "autograd needs torch; this is a NumPy implementation",
    ("backward_determinism", "numpy"): "autograd needs torch; this is a NumPy implementation",
    ("backward_follows_its_forward", "numpy"): "autograd needs torch; this is a NumPy "
                                               "implementation",
    ("gradients_of_every_input", "numpy"): "autograd needs torch; this is a NumPy implementation",
    ("softmax_of_empty_row_is_zero", "sdpa"): "an SDPA-style callable has no softmax",
    ("dropout_pattern_is_independent", "numpy"): "dropout is an SDPA argument",
    ("dropout_pattern_is_independent", "torch"): "dropout is an SDPA argument",
    ("dropout_across_rates", "numpy"): "dropout is an SDPA argument",
    ("dropout_across_rates", "torch"): "dropout is an SDPA argument",
    ("dropout_follows_the_seed", "numpy"): "dropout is an SDPA argument",
    ("dropout_follows_the_seed", "torch"): "dropout is an SDPA argument",
    ("dropout_backward_uses_forward_mask", "numpy"): "autograd needs torch",
    ("dropout_backward_uses_forward_mask", "torch"): "dropout is an SDPA argument",
    ("low_precision_gradients", "numpy"): "autograd needs torch; this is a NumPy implementation",
    # quick cases are tiny; tests/test_properties.py runs it at standard depth
    ("low_precision_gradients", "torch"): "no case of realistic size",
    ("low_precision_gradients", "sdpa"): "no case of realistic size",
}


@pytest.mark.parametrize("backend", REFERENCES)
@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(name, backend, battery):
    impl, contract, torch_or_numpy = REFERENCES[backend]
    finding = run(DETECTORS[name], subject(impl, f"reference-{backend}", contract, torch_or_numpy),
                  battery)
    why = NOT_APPLICABLE.get((name, backend))
    if why is None:
        assert finding.verdict == "survived", finding.message
        assert finding.message == f"[{name}] held on every case"
        assert finding.calls > 0
    else:
        assert finding.verdict == "n/a", finding.message
        assert finding.message.startswith(f"[{name}] n/a: ") and why in finding.message


# -- the harness: what becomes of a failing detector or a misbehaving implementation -------------


def test_a_detector_that_raises_is_an_error_never_a_kill(battery):
    def check(subject, battery):
        subject.attend(battery.attention[0])  # the implementation answers (wrongly, even)
        raise KeyError("oops")  # and the detector trips over its own feet

    detector = types.SimpleNamespace(NAME="clumsy", check=check)
    finding = run(detector, subject(NoScaling(), "no-scaling"), battery)
    assert finding.verdict == "error" and not finding.caught and finding.evidence is None
    head = "[clumsy] detector error KeyError: 'oops' (test_detectors.py:"  # and the line
    assert finding.message.startswith(head), finding.message


class Raises(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        raise ValueError("shapes do not align")


class ReturnsOutOnly(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        return super().attention(Q, K, V, mask)[0]  # the contract asks for (out, weights)


class Sleeps(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        time.sleep(1)  # far past the 0.05 s limit the test sets
        return super().attention(Q, K, V, mask)


class Spins(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        end = time.process_time() + 1  # computes far past the limit: cut at its processor time
        while time.process_time() < end:
            pass
        return super().attention(Q, K, V, mask)


@pytest.mark.parametrize("impl, verdict, what", [
    (Raises, "crashed", "got raised ValueError: shapes do not align ["),
    (ReturnsOutOnly, "crashed", "got returned a ndarray, not a pair (out, weights) ["),
    (Sleeps, "hung", "got no answer within 0.05 s of processor time (0.3 s of wall time) ["),
    (Spins, "hung", "got no answer within 0.05 s of processor time (0.3 s of wall time) ["),
], ids=["raises", "not-a-pair", "sleeps", "spins"])
def test_implementation_failures(impl, verdict, what, battery):
    sub = subject(impl(), impl.__name__, call_seconds=0.05)
    finding = run(DETECTORS["matches_loop_oracle"], sub, battery)
    assert finding.verdict == verdict and finding.caught, finding.message
    assert finding.message.startswith("[matches_loop_oracle] expected an answer, got ")
    assert what in finding.message and finding.message.endswith(")]"), finding.message
    assert ".attention(Q " in finding.message  # the call that failed, as it was made
    compile(finding.evidence.snippet, "<snippet>", "exec")
    if impl in (Sleeps, Spins):  # the call was cut short, not waited out
        assert finding.evidence.actual.startswith("no answer within 0.05 s"), finding.evidence


@pytest.mark.parametrize("impl", [LessonNumpy, Sleeps], ids=["answers", "sleeps"])
def test_an_in_process_call_leaves_the_alarm_as_it_found_it(impl, battery):
    """The time limit borrows SIGALRM for each call and gives it back, handler and timer."""
    def mine(signum, frame):
        pass

    before = signal.signal(signal.SIGALRM, mine)
    try:
        run(DETECTORS["matches_loop_oracle"], subject(impl(), impl.__name__, call_seconds=0.05),
            battery)
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, before)


def test_an_sdpa_callable_returning_a_tuple_crashes(battery):
    def returns_pair(query, key, value, **kwargs):
        out = scaled_dot_product_attention(query, key, value, **kwargs)
        return out, None  # the SDPA contract returns the output only

    finding = run(DETECTORS["matches_loop_oracle"], subject(returns_pair, "pair", "sdpa"), battery)
    assert finding.verdict == "crashed", finding.message
    assert "got returned a tuple, not a torch.Tensor [f(query" in finding.message


@pytest.mark.parametrize("name, functions, verdict, reason", [
    ("prefix_consistency", ("attention",), "n/a", "defines no causal_self_attention"),
    ("output_is_weighted_values", ("softmax", "causal_mask"), "n/a", "defines no attention"),
    ("input_immutability", ("causal_mask",), "n/a", "defines no softmax"),
    ("known_answers", ("softmax",), "survived", ""),
    ("matches_loop_oracle", ("attention",), "survived", ""),
])
def test_a_lesson_module_with_only_some_functions(name, functions, verdict, reason, battery):
    module = types.SimpleNamespace(**{fn: getattr(lesson_numpy, fn) for fn in functions})
    finding = run(DETECTORS[name], subject(module, "partial"), battery)
    assert finding.verdict == verdict, finding.message
    if verdict == "n/a":
        assert finding.message == f"[{name}] n/a: wrong/partial {reason}"
