"""The implementation under test as detectors see it: one view over both contracts.

A detector asks for attention on a :class:`~detectors.kit.battery.Call`; the subject turns it
into the call its contract offers — ``attention(Q, K, V, mask)`` for a lesson module,
``f(query, key, value, attn_mask=…, is_causal=…, scale=…, enable_gqa=…)`` for an SDPA-style
callable — and recovers attention weights from output-only kernels with an identity value
matrix, so every property detector applies to both.
"""

import contextlib
from dataclasses import dataclass

import numpy as np

from detectors.kit import expect, sdpa_request
from detectors.kit.calls import Request
from detectors.kit.capabilities import refusal
from detectors.kit.judge import Judge
from detectors.kit.layout import bare, cropped, regrouped_back, swapped_back
from detectors.kit.offers import Offers
from detectors.kit.outcomes import Record
from detectors.kit.trials import Trials
from detectors.kit.verdict import (
    CRASHED,
    ImplementationFailure,
    NotApplicable,
    Unsupported,
)


@dataclass
class Answer:
    out: np.ndarray
    weights: np.ndarray | None
    dtype: str  # dtype of out as the implementation returned it
    requests: tuple  # what was sent, for the evidence
    mutated: tuple | None = None  # arguments the call changed, when asked (inputs=True)
    grads: dict | None = None  # argument name -> gradient, when a gradient was asked for
    weights_dtype: str | None = None  # dtype of the weights as returned (lesson functions)
    kept: int | None = None  # the handle under which the returned arrays are kept (keep=True)


class Subject(Offers, Trials):
    """One implementation under test: its calls and answers (what it can be asked is
    :class:`Offers`; how its cases record their outcomes and evidence, :class:`Trials`)."""

    def __init__(self, target, executor, dtype="float64", scoped=False, judge=None):
        self.target = target
        self.executor = executor
        self.dtype = dtype  # the dtype every call uses unless a detector asks for another
        # scoped (check --dtype): every call of the run is at ``dtype``; a detector whose
        # property needs another dtype says so (n/a, or that case unsupported)
        self.scope = dtype if scoped else None
        self.last = None  # the last request sent, for the evidence of a crash
        self.current = None  # the battery case being tried, which derived calls belong to
        self.pad = False  # send E != Ev calls as their E == Ev twin (zero-padded, cropped)
        self.pad_for = None  # the case whose refusal made the subject try twins
        self.progress = None  # told each case a detector iterates: .case(done, total, name)
        self.base_dtype = dtype  # the run's dtype: a case sent at another is named for it
        self.run = Record()  # the running detector's outcomes (the runner gives each its own)
        self.flagged = None  # the id of the case whose relation failed last, in this trial
        self._trial_sent = None  # ids sent inside the innermost trial
        # the oracle, the reference and the measured precision (detectors.kit.judge)
        self.judge = judge or Judge(self, Subject)

    set_aside = property(lambda self: self.run.set_aside)  # case name -> why it is unsupported
    calls = property(lambda self: self.run.calls)  # answered in the running detector
    impl_seconds = property(lambda self: self.run.impl_seconds)  # inside those calls

    name = property(lambda self: self.target.name)
    contract = property(lambda self: self.target.contract)
    backend = property(lambda self: self.target.backend)
    manifest = property(lambda self: self.executor.manifest)

    def fresh(self):
        """Move this subject to an implementation that has made no calls yet."""
        self.executor = self.executor.fresh()
        return self

    @contextlib.contextmanager
    def at(self, dtype):
        """Make every call in the block at ``dtype`` (the baselines are float64 suites)."""
        saved, self.dtype = self.dtype, dtype
        try:
            yield self
        finally:
            self.dtype = saved

    # -- calls -----------------------------------------------------------------------------

    def send(self, request):
        if self.backend == "numpy" and request.dtype == "bfloat16":
            raise NotApplicable("NumPy has no bfloat16")
        if request.fn != "sdpa" and self.manifest.lacks(request.fn):
            raise LookupError(f"{request.fn} was called but the detector's NEEDS lacks it")
        scoped = self.out_of_scope(request.dtype if request.fn != "causal_mask" else None)
        if scoped:  # a detector that forgot the scope: its case is set aside, never called
            raise Unsupported(self._key(request), scoped)
        self.last = request
        try:
            result = self.executor.run(request)
        except ImplementationFailure as failure:
            if failure.verdict == CRASHED and refusal(failure.what, self.refuses):
                q, v = request.args[0], request.args[2]
                key = self._key(request)
                if request.fn == "sdpa" and q.shape[-1] != v.shape[-1] and not self.pad:
                    self.pad, self.pad_for = True, key  # try its E == Ev twin first
                    raise _Twin() from None
                if getattr(request, "crop", None) and self.pad_for == key:
                    self.pad, self.pad_for = False, None  # the twin is refused as well
                raise Unsupported(key, f"refused: {failure.what}") from None
            raise
        if getattr(request, "crop", None):
            result = cropped(result, *request.crop)
        if getattr(request, "swapped", False):
            result = swapped_back(result)
        if getattr(request, "regrouped", None) is not None:
            result = regrouped_back(result, request.regrouped)
        self.run.calls += 1
        self.run.impl_seconds += result.seconds
        if result.kept is not None:  # for a reproduction of what a caller did with it
            request.handle = result.kept
        return result

    def attend(self, call, weights=False, dtype=None, **kw):
        """Out (and weights, if asked) of one attention call."""
        dtype = dtype or self.dtype
        request, result = self._ask(lambda: self.request(call, dtype, **kw))
        requests, w, w_dtype = (request,), None, None
        if self.contract == "lesson":
            w, w_dtype = (result.values[1] if weights else None), result.dtypes[1]
        elif weights:
            w, eye_request = self._weights(call, dtype, **kw)
            requests += (eye_request,)
        return Answer(result.values[0], w, result.dtypes[0], requests, result.mutated,
                      result.grads, w_dtype, result.kept)

    def expected(self, call):
        """(out, weights) of exact attention on ``call`` in the target's causal alignment
        (the softmax, for a softmax call): what the oracle says."""
        return self.judge.expected(call)

    def allowance(self, call, expected, dtype=None, what="out"):
        """The error a semantic relation allows in ``what`` ("out" or "weights") of ``call``,
        at the precision the target was measured to compute ``dtype`` inputs at."""
        return self.judge.allowance(call, expected, dtype, what)

    def strict_allowance(self, call, expected, dtype=None, what="out"):
        """The error correct code makes at ``dtype`` itself: what precision properties use."""
        return self.judge.strict_allowance(call, expected, dtype, what)

    def baseline(self, call):
        """The subject's own answer to ``call`` (checked for shape) and the error allowed on
        it: the starting point of every relation that compares the subject with itself."""
        answer = self.attend(call)
        out = self.expected(call)[0]
        with self.case(call.name, answer):
            expect.same_shape(answer.out, out.shape)
        return answer, self.allowance(call, out)

    def gradcheck(self, call):
        """torch.autograd.gradcheck on one call in float64: (passed, its complaint, the answer)."""
        request, result = self._ask(lambda: self.request(call, "float64", gradcheck=True))
        passed = bool(result.values[0])
        return passed, result.message, Answer(result.values[0], None, "bool", (request,))

    def _ask(self, build):
        """(request, result) of the request ``build`` makes; a kernel that refused an E != Ev
        call is sent its E == Ev twin at once (``build`` then makes the twin)."""
        request = build()
        try:
            return request, self.send(request)
        except _Twin:
            request = build()
            return request, self.send(request)

    def _key(self, request):
        """The case a request belongs to: the battery case being iterated, else its call."""
        return self.current or getattr(request, "case", None) or request.describe()

    def request(self, call, dtype, **kw):
        """The request this subject's contract makes for an attention call. ``between`` (new
        q, k and v, by name) asks for a second call with them, sent as this one is, between
        this call's forward and its backward."""
        reason = self.cannot(call)
        if reason:
            raise NotApplicable(reason)
        why = self.outside(call) if self.contract == "sdpa" else None
        if why:
            raise Unsupported(self.current or call.name, why)
        if kw.get("between") is not None:
            kw["between"] = self._built(call.with_(**kw["between"]), dtype).args
        request = self._built(call, dtype, **kw)
        self._note(call, request)
        return request

    def _built(self, call, dtype, **kw):
        if self.contract == "lesson":
            args = (call.q, call.k, call.v) + (() if call.mask is None else (self.keep_mask(call),))
            return Request("attention", args, dtype=dtype, device=self.target.device,
                           layout=call.spec.layout, **kw)
        return sdpa_request.build(self, call, call.v, dtype, **kw)

    def keep_mask(self, call):
        """The call's keep-mask in the convention the target declared (drop: True = masked)."""
        return call.mask if self.target.mask_convention == "keep" else ~call.mask

    def _weights(self, call, dtype, **kw):
        """Weights of an output-only kernel: with V = I the output row is the weight row."""
        S = call.v.shape[-2]
        eye = np.broadcast_to(np.eye(S), call.v.shape[:-2] + (S, S)).copy()
        request, result = self._ask(lambda: sdpa_request.build(self, call, eye, dtype, **kw))
        return result.values[0], request

    def self_attend(self, call, weights=False, dtype=None, **kw):
        """causal_self_attention(X, W_q, W_k, W_v); for SDPA, the projections with is_causal."""
        dtype = dtype or self.dtype
        if self.contract == "lesson":
            request = Request("causal_self_attention", (call.x, call.w_q, call.w_k, call.w_v),
                              dtype=dtype, device=self.target.device, **kw)
            self._note(call, request)
            result = self.send(request)  # (a lesson function: no E == Ev twin to try)
            out, w = result.values
            return Answer(out, w if weights else None, result.dtypes[0], (request,),
                          result.mutated, result.grads, result.dtypes[1])
        as_call = sdpa_request.projected(call)  # is_causal: request() says so if the callable lacks it
        if kw.get("grad") is not None:  # the upstream gradient as the (N, 1, T, d_v) answer
            kw["grad"] = kw["grad"].reshape(as_call.q.shape[:-1] + as_call.v.shape[-1:])
        answer = self.attend(as_call, weights=weights, dtype=dtype, **kw)
        shape = call.x.shape[:-1]  # (..., T): drop the (N, 1) head axis the call added
        answer.out = sdpa_request.unfold(answer.out, shape)
        if answer.weights is not None:
            answer.weights = sdpa_request.unfold(answer.weights, shape)
        return answer

    def softmax(self, x, dtype=None, keep=False, inputs=False, guarded=False):
        request = Request("softmax", (x,), dtype=dtype or self.dtype, device=self.target.device,
                          keep=keep, inputs=inputs, guarded=guarded)
        result = self.send(request)
        return Answer(result.values[0], None, result.dtypes[0], (request,), result.mutated,
                      kept=result.kept)

    def as_returned(self, request, values):
        """An answer to ``request`` made of ``values`` (as the executor returned them), for
        the evidence of a relation on it."""
        return Answer(values[0], None, request.dtype, (request,))

    def reread(self, answer):
        """``answer`` (made with ``keep=True``) as the arrays it returned hold it now: an Answer
        whose out (and weights, for a lesson function) are read again after later calls."""
        values, dtypes = self.executor.reread(answer.kept)
        crop = getattr(answer.requests[0], "crop", None)
        if crop:
            values = cropped(bare(values), *crop).values
        if getattr(answer.requests[0], "swapped", False):  # read in its layout, as it was sent
            values = swapped_back(bare(values)).values
        if getattr(answer.requests[0], "regrouped", None) is not None:
            values = regrouped_back(bare(values), answer.requests[0].regrouped).values
        weights = values[1] if len(values) > 1 and answer.weights is not None else None
        return Answer(values[0], weights, dtypes[0], answer.requests[:1])

    def causal_mask(self, T):
        """causal_mask(T), read in the keep convention whatever convention was declared."""
        request = Request("causal_mask", (T,), device=self.target.device)
        result = self.send(request)
        mask = result.values[0]
        if self.target.mask_convention == "drop" and mask.dtype == bool:
            mask = ~mask  # a drop-convention module returns True where attending is forbidden
        return Answer(mask, None, result.dtypes[0], (request,), result.mutated)


class _Twin(Exception):
    """A kernel refused an E != Ev call: the subject now sends E == Ev twins."""
