"""What a detector compares its subject with, and how closely: the judge.

A detector asks ``subject.expected(call)`` (the oracle's answer, read in the target's causal
alignment) and ``subject.allowance(call, expected)`` (the error a semantic relation allows);
the subject passes both to its judge. The judge owns what a run learns once and keeps: the
reference run as a subject of its own (for its error at each precision), and the target's
precision measured on plain cases (detectors.kit.precision). The arithmetic of tolerances is
pure (detectors.kit.tolerance); running things is the judge's.
"""

import functools
from dataclasses import replace

import numpy as np

from detectors.kit import conventions, precision, tolerance
from detectors.kit.battery import Call, SelfCall, SoftmaxCall
from detectors.kit.memory import laid_out

REFERENCES = {
    ("lesson", "numpy"): "reference.lesson_numpy",
    ("lesson", "torch"): "reference.lesson_torch",
    ("sdpa", "torch"): "reference.sdpa:scaled_dot_product_attention",
}
_REFERENCES = {}  # (contract, backend, device) -> the reference as a subject


class Judge:
    """The oracle, the reference and the measured precision of one subject.

    ``make`` builds a plain subject (the reference's, the precision probe's): the judge is
    given it rather than importing the subject it serves."""

    def __init__(self, subject, make):
        self.subject, self.make = subject, make
        self.precisions = {}  # dtype -> precision.Precision, measured once

    def expected(self, call):
        """(out, weights) of exact attention on ``call``, its rows with no allowed key as the
        subject declared them (detectors.kit.conventions: zeros by default); the softmax of a
        softmax call."""
        if isinstance(call, Call):
            alignment = self.subject.target.causal_alignment
            return conventions.expected(call, call.expected(alignment), alignment,
                                        self.subject.empty_rows)
        return call.expected()

    def gradients(self, call, grads, upstream):
        """The reference's gradients ``grads`` of sum(out * ``upstream``) on ``call``, with
        the rows that have no allowed key as the subject declared them."""
        return conventions.gradients(call, grads, upstream, self.subject.target.causal_alignment,
                                     self.subject.empty_rows)

    def strict_allowance(self, call, expected, dtype=None, what="out"):
        """The largest error correct code makes at ``dtype`` in ``what`` of ``call``."""
        dtype = dtype or self.subject.dtype
        error = 0.0 if dtype == "float64" else \
            reference_error(self.reference(), call, dtype, what)
        return tolerance.strict(call, expected, dtype, what, error)

    def allowance(self, call, expected, dtype=None, what="out"):
        """The largest error a *semantic* relation allows: the strict allowance of the
        precision the target was measured to compute ``dtype`` inputs at, so a target that is
        only less precise is reported once, as a precision finding, not by every relation."""
        dtype = dtype or self.subject.dtype
        # measured on attention calls: it judges the function it was measured on (SDPA's
        # self-attention is an attention call too), never a lesson module's other functions
        measured = isinstance(call, Call) or (self.subject.contract == "sdpa"
                                              and isinstance(call, SelfCall))
        return self.strict_allowance(call, expected, self.effective(dtype) if measured
                                     else dtype, what)

    def precision(self, dtype):
        """The target's precision at ``dtype``, measured once. The plain calls go to a spare
        executor through a subject of their own, so the detector that happens to ask first
        keeps its own call count, cases set aside and history."""
        if dtype not in self.precisions:
            s = self.subject
            spare = getattr(s.executor, "spare", lambda: s.executor)()
            probe = self.make(s.target, spare, dtype)
            self.precisions[dtype] = precision.on(
                s, lambda call: precision.attend(probe, call, dtype), dtype)
        return self.precisions[dtype]

    def measure(self, attend, dtype):
        """The precision ``attend(call)`` answers plain cases at (``computes_at_input_precision``
        measures the subject's own calls with it, as the run was measured)."""
        return precision.on(self.subject, attend, dtype)

    def formats(self, dtype):
        """``dtype`` and the coarser formats the subject may compute it at, coarsest last."""
        return precision.formats(self.subject, dtype)

    def effective(self, dtype):
        """The format relations at ``dtype`` are judged at: the measured one, or ``dtype``
        itself when no floating-point format explains the error (the cap)."""
        return self.precision(dtype).effective or dtype

    def reference(self, backend=None):
        """This repository's reference for the subject's contract, on its device, as a
        subject. It is trusted code: it runs wherever the subject's executor runs trusted code
        (``executor.trusted(target)``), so the kit never needs to know how calls are run."""
        t = self.subject.target
        key = (t.contract, backend or t.backend, t.device)
        if key not in _REFERENCES:
            # the target's declarations are its own
            target = replace(t, name="reference", locator=REFERENCES[key[:2]], backend=key[1],
                             mask_convention="keep", causal_alignment="top-left",
                             empty_rows="zero", unsupported=(), refuses=())
            _REFERENCES[key] = self.make(target, self.subject.executor.trusted(target))
        return _REFERENCES[key]


def reference_error(reference, call, dtype, what):
    """Max |reference at dtype − float64 oracle| on this call (its own precision)."""
    return _reference_error(reference, call, dtype, what)


@functools.lru_cache(maxsize=8192)
def _reference_error(reference, call, dtype, what):
    if isinstance(call, SelfCall):
        answer = reference.self_attend(call, weights=what == "weights", dtype=dtype)
        want = call.expected()
    elif isinstance(call, SoftmaxCall):
        answer = reference.softmax(call.x, dtype=dtype)
        return float(np.nanmax(np.abs(answer.out - call.expected()), initial=0.0))
    elif what == "weights" and _identity_cost(call) > DIRECT_WEIGHTS and _on_cpu(reference):
        want = call.expected("top-left")
        return tolerance._err(_sdpa_reference_weights(call, dtype), want[1])
    else:
        answer = reference.attend(call, weights=what == "weights", dtype=dtype)
        want = call.expected("top-left")
    got = answer.weights if what == "weights" else answer.out
    diff = np.abs(got - (want[1] if what == "weights" else want[0]))
    return float(np.nanmax(diff, initial=0.0))


# Weights of an output-only reference come from V = I, an (L, S) @ (S, S) product per head:
# cubic in the length. Beyond this many multiply-adds the CPU reference's weights are taken
# from its own steps instead — the same numbers, since a product with I only copies them.
DIRECT_WEIGHTS = 1 << 22


def _identity_cost(call):
    lead = max(int(np.prod(call.q.shape[:-2])), int(np.prod(call.k.shape[:-2])))
    return lead * call.q.shape[-2] * call.k.shape[-2] ** 2


def _on_cpu(reference):
    t = reference.target
    return t.contract == "sdpa" and t.backend == "torch" and t.device == "cpu"


def _sdpa_reference_weights(call, dtype):
    """reference.sdpa's weights at ``dtype``, step by step, as its V = I answer would give them."""
    import torch  # only for an SDPA reference on the CPU: a NumPy run never loads torch

    from reference.sdpa import scaled_dot_product_attention as sdpa

    def tensor(a):
        t = torch.from_numpy(np.array(a, copy=True))
        t = t if a.dtype == bool else t.to(getattr(torch, dtype))
        return laid_out(t, call.spec.layout)  # the layout the executor sends

    q, k, v = tensor(call.q), tensor(call.k), tensor(call.v)
    if call.gqa:
        k, v = sdpa.share_kv_heads(q, k, v)
    mask = call.mask if call.mask is not None else call.bias
    scores = sdpa.scores(q, k, call.scale)  # (..., L, S)
    scores = scores + sdpa.bias(None if mask is None else tensor(mask), call.causal,
                                q.shape[-2], k.shape[-2], q)
    return sdpa.weights(scores, 0.0).double().numpy()  # (..., L, S)
