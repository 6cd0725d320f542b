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

from detectors.kit import expect
from detectors.kit.calls import ARG_NAMES, Request
from detectors.kit.expect import Mismatch
from detectors.kit.verdict import Evidence, Flag, NotApplicable


@dataclass
class Answer:
    out: np.ndarray
    weights: np.ndarray | None
    dtype: str  # dtype of out as the implementation returned it
    requests: tuple  # what was sent, for the evidence
    mutated: tuple = ()
    grads: dict | None = None  # argument name -> gradient, when a gradient was asked for


class Subject:
    def __init__(self, target, executor, dtype="float64"):
        self.target = target
        self.executor = executor
        self.dtype = dtype  # the dtype every call uses unless a detector asks for another
        self.calls = 0
        self.impl_seconds = 0.0
        self.last = None  # the last request sent, for the evidence of a crash

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

    # -- what the subject offers ---------------------------------------------------------
    # Which functions a detector may call is decided once, by the runner, from the detector's
    # NEEDS (detectors.kit.needs); what is left to decide here is per call: whether this
    # target's contract and keywords can express one case of the battery.

    parts = ()  # the parts of the running detector's NEEDS that apply (set by the runner)
    declared = ()  # all the parts its NEEDS names

    def uses(self, part):
        """Does the part of the running detector named ``part`` apply to this target?"""
        if part not in self.declared:  # a misspelt part would silently never run
            raise KeyError(f"part {part!r} is not in the detector's NEEDS {self.declared}")
        return part in self.parts

    def cannot(self, call):
        """Why this target cannot make ``call`` (a contract or a keyword short), or None."""
        if self.contract not in call.spec.contracts:
            return f"the {self.contract} contract cannot express case {call.name}"
        if self.contract == "sdpa":
            missing = [k for k in self._keywords(call) if k not in self.manifest.keywords]
            if missing:
                return f"the callable takes no {', '.join(missing)}"
        return None

    def supports(self, call):
        return self.cannot(call) is None

    def cases(self, battery, where=lambda spec: True):
        """The battery's attention calls this target can make, smallest first."""
        return [c for c in battery.attention if where(c.spec) and self.supports(c)]

    @property
    def weights_free(self):
        """Do the weights come with the output (a lesson ``attention``), at no extra call?"""
        return self.contract == "lesson"

    @property
    def heads_axis(self):
        """Does every attention call carry (N, H) in front, as SDPA's does?"""
        return self.contract == "sdpa"

    # -- calls -----------------------------------------------------------------------------

    def send(self, request):
        if self.backend == "numpy" and request.dtype == "bfloat16":
            raise NotApplicable("NumPy has no bfloat16")
        if request.fn != "sdpa" and self.manifest.lacks(request.fn):
            raise LookupError(f"{request.fn} was called but the detector's NEEDS lacks it")
        self.last = request
        result = self.executor.run(request)
        self.calls += 1
        self.impl_seconds += result.seconds
        return result

    def attend(self, call, weights=False, dtype=None, **kw):
        """Out (and weights, if asked) of one attention call."""
        dtype = dtype or self.dtype
        request = self.request(call, dtype, **kw)
        result = self.send(request)
        requests, w = (request,), None
        if self.contract == "lesson":
            w = result.values[1] if weights else None
        elif weights:
            w, eye_request = self._weights(call, dtype, **kw)
            requests += (eye_request,)
        return Answer(result.values[0], w, result.dtypes[0], requests, result.mutated,
                      result.grads)

    def baseline(self, call):
        """The subject's own answer to ``call`` (checked for shape) and the error allowed on
        it: the starting point of every relation that compares the subject with itself."""
        from detectors.kit.tolerance import allowance

        answer = self.attend(call)
        out = call.expected(self.target.causal_alignment)[0]
        with self.case(call.name, answer):
            expect.same_shape(answer.out, out.shape)
        return answer, allowance(self, call, out)

    def gradcheck(self, call):
        """torch.autograd.gradcheck on one call in float64: (passed, its complaint, the answer)."""
        request = self.request(call, "float64", gradcheck=True)
        result = self.send(request)
        passed = bool(result.values[0])
        return passed, result.message, Answer(result.values[0], None, "bool", (request,))

    def request(self, call, dtype, **kw):
        """The request this subject's contract makes for an attention call."""
        reason = self.cannot(call)
        if reason:
            raise NotApplicable(reason)
        if self.contract == "lesson":
            args = (call.q, call.k, call.v) + (() if call.mask is None else (self._mask(call),))
            return Request("attention", args, dtype=dtype, device=self.target.device,
                           strided=call.spec.strided, **kw)
        return self._sdpa_request(call, call.v, dtype, **kw)

    def _mask(self, call):
        """The call's keep-mask in the convention the target declared (drop: True = masked)."""
        return call.mask if self.target.mask_convention == "keep" else ~call.mask

    def _weights(self, call, dtype, **kw):
        """Weights of an output-only kernel: with V = I the output row is the weight row."""
        S = call.v.shape[-2]
        eye = np.broadcast_to(np.eye(S), call.v.shape[:-2] + (S, S)).copy()
        request = self._sdpa_request(call, eye, dtype, **kw)
        return self.send(request).values[0], request

    def _sdpa_request(self, call, v, dtype, **kw):
        kwargs = {}
        if call.mask is not None:
            kwargs["attn_mask"] = self._mask(call)
        if call.bias is not None:
            kwargs["attn_mask"] = call.bias
        if call.causal:
            kwargs["is_causal"] = True
        if call.scale is not None:
            kwargs["scale"] = call.scale
        if call.gqa:
            kwargs["enable_gqa"] = True
        kwargs.update(kw.pop("extra", {}))
        return Request("sdpa", (call.q, call.k, v), kwargs, dtype=dtype,
                       device=self.target.device, strided=call.spec.strided, **kw)

    @staticmethod
    def _keywords(call):
        names = []
        if call.mask is not None or call.bias is not None:
            names.append("attn_mask")
        names += [n for n, on in (("is_causal", call.causal), ("scale", call.scale is not None),
                                  ("enable_gqa", call.gqa)) if on]
        return names

    def self_attend(self, call, weights=False, dtype=None, **kw):
        """causal_self_attention(X, W_q, W_k, W_v); for SDPA, the projections with is_causal."""
        dtype = dtype or self.dtype
        if self.contract == "lesson":
            request = Request("causal_self_attention", (call.x, call.w_q, call.w_k, call.w_v),
                              dtype=dtype, device=self.target.device, **kw)
            result = self.send(request)
            out, w = result.values
            return Answer(out, w if weights else None, result.dtypes[0], (request,),
                          result.mutated, result.grads)
        as_call = self.projected(call)  # is_causal: request() says so if the callable lacks it
        answer = self.attend(as_call, weights=weights, dtype=dtype, **kw)
        shape = call.x.shape[:-1]  # (..., T): drop the (N, 1) head axis the call added
        answer.out = _unfold(answer.out, shape)
        if answer.weights is not None:
            answer.weights = _unfold(answer.weights, shape)
        return answer

    @staticmethod
    def projected(call):
        """A self-attention call as an SDPA call on (N, 1, T, d) projections with is_causal."""
        from detectors.kit.battery import Call, Spec

        q, k, v = call.projections()  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        lead = (q.shape[0] if q.ndim == 3 else 1, 1)
        q, k, v = (a.reshape(lead + a.shape[-2:]) for a in (q, k, v))
        spec = Spec(call.name, q.shape, k.shape, v.shape, causal=True)
        return Call(spec, q, k, v, name=call.name)

    def softmax(self, x, dtype=None):
        request = Request("softmax", (x,), dtype=dtype or self.dtype, device=self.target.device)
        result = self.send(request)
        return Answer(result.values[0], None, result.dtypes[0], (request,), result.mutated)

    def causal_mask(self, T):
        """causal_mask(T), read in the keep convention whatever convention was declared."""
        request = Request("causal_mask", (T,), device=self.target.device)
        result = self.send(request)
        mask = result.values[0]
        if self.target.mask_convention == "drop" and mask.dtype == bool:
            mask = ~mask  # a drop-convention module returns True where attending is forbidden
        return Answer(mask, None, result.dtypes[0], (request,), result.mutated)

    # -- evidence --------------------------------------------------------------------------

    @contextlib.contextmanager
    def case(self, name, *answers, relation=""):
        """The one envelope of evidence: a Mismatch raised in the block becomes a Flag that
        names the case, the calls of ``answers``, the relation and a reproduction."""
        try:
            yield
        except Mismatch as m:
            m = m.because(relation)
            raise Flag(m, self.evidence(answers, name, m.index, relation)) from None

    def evidence(self, answers, case="", index=None, relation=""):
        """Where a property failed, with a snippet that reproduces the calls."""
        requests = [r for a in answers for r in a.requests]
        calls = "; ".join(dict.fromkeys(r.describe(self.name) for r in requests[:2]))
        return Evidence(calls, index=index, case=case,
                        snippet=snippet(self.target, requests, relation))


def _unfold(a, shape):
    """(N, 1, T, d) back to (..., T, d); an answer of any other size is left for the checks."""
    want = shape + a.shape[-1:]
    return a.reshape(want) if a.size == int(np.prod(want)) and a.ndim >= 2 else a


def snippet(target, requests, relation=""):
    """Python that loads the target and repeats the calls with the same inputs."""
    torch = target.backend == "torch"
    lines = ["import numpy as np"] + (["import torch"] if torch else [])
    lines += ["from attnzoo.sandbox.target import load", f"impl = load({target.locator!r})"]
    names = {}
    for n, request in enumerate(requests, 1):
        arg_names = ARG_NAMES[request.fn]
        parts = []
        for name, a in list(zip(arg_names, request.args)) + list(request.kwargs.items()):
            if isinstance(a, np.ndarray):
                var = names.get(id(a))
                if var is None:
                    var = f"{name}{len(names) + 1}"
                    names[id(a)] = var
                    lines.append(f"{var} = {_literal(a, request.dtype, torch, target.device)}")
                parts.append(var if name in arg_names else f"{name}={var}")
            else:
                parts.append(repr(a) if name in arg_names else f"{name}={a!r}")
        fn = "impl" if request.fn == "sdpa" else f"impl.{request.fn}"
        lines.append(f"r{n} = {fn}({', '.join(parts)})")
    if relation:
        lines.append(f"# {relation}")
    return "\n".join(lines)


def _number(x):
    x = float(x)
    return repr(x) if np.isfinite(x) else f'float("{x}")'


def _literal(a, dtype, torch, device):
    body = np.array2string(a, separator=", ", threshold=10**6, max_line_width=10**6,
                           formatter=None if a.dtype == bool else {"float_kind": _number})
    kind = "bool" if a.dtype == bool else dtype
    if not torch:
        return f"np.array({body}, dtype=np.{kind})" if kind != "bool" else f"np.array({body})"
    on = f", device={device!r}" if device != "cpu" else ""
    return f"torch.tensor({body}, dtype=torch.{kind}{on})"
