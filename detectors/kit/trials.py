"""The evidence half of a subject: each case a detector tries records its own outcome.

``subject.trial(call)`` is one case of the running detector (detectors.kit.outcomes);
``subject.case(name, *answers, relation=…)`` is the one envelope of evidence, turning a
:class:`~detectors.kit.expect.Mismatch` raised in its block into a Flag that names the case,
the calls, the relation and a reproduction.
"""

import contextlib

from detectors.kit import claims
from detectors.kit.battery import Call
from detectors.kit.conventions import DEFAULT, rows
from detectors.kit.expect import Mismatch
from detectors.kit.outcomes import CaseId, Outcome
from detectors.kit.script import NoScript, script
from detectors.kit.snippet import snippet
from detectors.kit.verdict import (
    Evidence,
    Flag,
    ImplementationFailure,
    Unsupported,
    envelope,
)


class Trials:
    """What :class:`detectors.kit.subject.Subject` records per case (it sets ``run``,
    ``current``, ``flagged``, ``last``, ``base_dtype`` and ``_trial_sent``)."""

    def case_id(self, name, dtype):
        """The :class:`CaseId` of a case named ``name``, sent at ``dtype``."""
        return CaseId.of(name, dtype, self.base_dtype, self.current)

    def _note(self, call, request):
        """Record what was sent, per case, for the per-case outcomes."""
        request.case = call.name
        if self.empty_rows != DEFAULT and isinstance(call, Call):  # for evidence() below
            request.empty_rows = bool(rows(call, self.target.causal_alignment).any())
        key = CaseId.of(call.name, request.dtype, self.base_dtype)
        self.run.note(key, call, request)
        if self._trial_sent is not None:
            self._trial_sent.add(key)

    @contextlib.contextmanager
    def case(self, name, *answers, relation=""):
        """The one envelope of evidence: a Mismatch raised in the block becomes a Flag that
        names the case, the calls of ``answers``, the relation and a reproduction."""
        try:
            yield
        except Mismatch as m:
            m = m.because(relation)
            dtypes = [r.dtype for a in answers for r in a.requests if r.dtype != self.base_dtype]
            self.flagged = self.case_id(name, dtypes[0] if dtypes else None)
            raise Flag(m, self.evidence(answers, name, m.index, relation, lazy=True,
                                        claim=claims.of(m, answers))) from None

    @contextlib.contextmanager
    def trial(self, call):
        """One case of the running detector: a failure in the block is recorded as this case's
        outcome and the detector goes on with its next case (unless the run wants only its
        first failure); a refusal sets the case aside. ``call`` is the battery case, or its name."""
        name = getattr(call, "name", call)
        outer, outer_sent = (self.current, self.flagged), self._trial_sent
        self.current, self.flagged, self._trial_sent = name, None, set()
        sent = self._trial_sent
        try:
            yield
        except Unsupported as u:
            self.run.set_aside.setdefault(u.case or name, u.why)
        except (Flag, Mismatch, ImplementationFailure) as failure:
            self.run.fail(self.failed_id(), self.outcome(failure), sent)
        finally:
            (self.current, self.flagged), self._trial_sent = outer, outer_sent
            if outer_sent is not None:
                outer_sent |= sent

    def answers(self, calls, ask, name=None):
        """``[(call, ask(call))]`` for the calls of ``calls`` answered, each asked in its own
        trial (named ``name(call)``, else the call's name): one refused or failed is recorded
        and left out of the comparisons that follow."""
        got = []
        for call in calls:
            with self.trial(name(call) if name else call):
                got.append((call, ask(call)))
        return got

    def failed_id(self):
        """The case that just failed: the one the failed relation named, else the last call's."""
        if self.flagged is not None:
            return self.flagged
        last = self.last
        if last is None:
            return CaseId(self.current or "?")
        return self.case_id(self.current or getattr(last, "case", None) or last.describe(),
                            last.dtype)

    def outcome(self, failure):
        """The :class:`Outcome` of a failure met in a trial (or by the runner)."""
        name = self.run.detector
        if isinstance(failure, Mismatch):  # raised outside subject.case: the last call is it
            failure = Flag(failure, self.evidence(self._last_sent(), index=failure.index,
                                                  claim=claims.of(failure, [])))
        if isinstance(failure, Flag):
            return Outcome(failure.verdict, envelope(name, failure.text, failure.evidence.call),
                           failure.evidence, failure, failure.evidence.case)
        call = self.last
        described = call.describe(self.name) if call is not None else failure.call
        sent = self.evidence(self._last_sent(), claim=claims.crashed([call])) if call else None
        evidence = Evidence(described, expected="an answer", actual=failure.what,
                            snippet=sent.snippet if sent else "",
                            scripted=sent.scripted if sent else None)
        return Outcome(failure.verdict, envelope(name, f"expected an answer, got {failure.what}",
                                                 described), evidence, failure, self.current or "")

    def _last_sent(self):
        return [_Sent(self.last)] if self.last is not None else []

    def evidence(self, answers, case="", index=None, relation="", lazy=False, claim=None):
        """Where a property failed, with a snippet that reproduces the calls (``lazy``: built
        when first wanted, ``Evidence.resolve``) and, given the ``claim`` the failure makes
        (detectors.kit.claims), the standalone script that checks it again."""
        requests = [r for a in answers for r in a.requests]
        calls = "; ".join(dict.fromkeys(r.describe(self.name) for r in requests[:2]))
        target = self.target
        scripted = None if claim is None else \
            lambda about=(): script(target, requests, claim, relation, about)
        if claim is not None and claim.kind in ("oracle", "gradient") and \
                any(getattr(r, "empty_rows", False) for r in requests):
            scripted = _unscripted(self.empty_rows)
        if lazy:
            return Evidence(calls, index=index, case=case,
                            make=lambda: snippet(target, requests, relation), scripted=scripted)
        return Evidence(calls, index=index, case=case, snippet=snippet(target, requests, relation),
                        scripted=scripted)


def _unscripted(convention):
    """The script maker of a claim against exact attention on a call with rows that have no
    allowed key, under a declared convention the script's exact attention does not write out."""
    def refused(about=()):
        raise NoScript(f"a call with rows that have no allowed key, which the target declared "
                       f"{convention!r}: the script's exact attention gives such rows zeros")
    return refused


class _Sent:
    """An answer-shaped holder for a request that got no answer."""

    def __init__(self, request):
        self.requests = (request,)
