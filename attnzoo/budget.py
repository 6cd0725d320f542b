"""``check --budget``: the most telling cases first, and what the time reached.

A gate for generated kernels has seconds, not minutes. A budgeted check runs *units*: one
detector on the cases one tier of the battery adds (the quick cases, or what standard or deep
adds to the tier before: ``Battery(start=...)``), every unit up to ``--depth``. The units run in
the order of ``budget_order.json``: the unit that catches the most zoo rows per second first,
each later one counted only for the rows the ones before it leave uncaught (a greedy cover).
``attnzoo bench --budgets`` measures that order from the kill matrix's cells and each unit's
time on the reference, never by hand; units it does not name (a detector newer than the file)
run last, shallowest tier first. The order does not depend on the budget, so a run with a
budget of B does what a longer one does in its first B seconds. When the time is spent the
report says which detectors reached which tier, and which clauses of the contract and values of
its input space the calls that ran covered.
"""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from detectors.kit.depths import DEPTHS

ORDER_FILE = Path(__file__).with_name("budget_order.json")


def load_order(path=ORDER_FILE):
    """``{contract: [[detector, tier], ...]}``, most telling first; {} without the file."""
    try:
        return json.loads(Path(path).read_text())["order"]
    except FileNotFoundError:
        return {}


def tiers(depth):
    """The tiers a check at ``depth`` runs, shallowest first."""
    return DEPTHS[:DEPTHS.index(depth) + 1]


def units(detectors, contract, depth, order=None):
    """[(detector, tier)]: every chosen detector at every tier up to ``depth``, in the measured
    order of the contract; those the order does not name after it, shallowest tier first, in
    the suite's order."""
    ranked = (load_order() if order is None else order).get(contract, [])
    by_name = {d.NAME: d for d in detectors}
    wanted = [(d, t) for t in tiers(depth) for d in detectors]
    keys = {(d.NAME, t) for d, t in wanted}
    first = [(by_name[n], t) for n, t in ranked if (n, t) in keys]
    named = {(d.NAME, t) for d, t in first}
    return first + [(d, t) for d, t in wanted if (d.NAME, t) not in named]


def merge(found):
    """One detector's finding from its finding at each tier reached: the shallowest tier that
    flagged it; else a detector error at any tier; else the deepest tier where it held; else
    the deepest where its cases were outside what the target supports; else n/a. The time,
    calls and cases set aside of every tier run are added up."""
    from detectors.kit.verdict import ERROR, SURVIVED, UNSUPPORTED

    found = sorted(found, key=lambda tf: DEPTHS.index(tf[0]))
    findings = [f for _, f in found]
    chosen = next((f for f in findings if f.caught), None) \
        or next((f for f in findings if f.verdict == ERROR), None) \
        or next((f for f in reversed(findings) if f.verdict == SURVIVED), None) \
        or next((f for f in reversed(findings) if f.verdict == UNSUPPORTED), None) \
        or findings[-1]
    for f in findings:
        if f is not chosen:
            chosen.seconds += f.seconds
            chosen.calls += f.calls
            chosen.impl_seconds += f.impl_seconds
            chosen.unsupported = {**f.unsupported, **chosen.unsupported}
    chosen.tiers = [tier for tier, _ in found]
    return chosen


def run(chosen, subject, seed, depth, one, progress, stop=None, offset=0, total=None):
    """Run the units of ``depth`` in the measured order until the deadline (or ``stop`` says a
    finding ends the run). Returns (findings in the suite's order, names not run at all,
    ``{tier: names that ran but not at that tier}``, why it stopped or None)."""
    from attnzoo.sandbox import session
    from attnzoo.sandbox.executor import DeadlineReached
    from detectors.kit.battery import Battery

    todo = units(chosen, subject.target.contract, depth)
    total = total or len(todo)
    batteries, found, why = {}, {}, None
    with session.one_blas_thread():
        for i, (detector, tier) in enumerate(todo):
            progress.detector(offset + i + 1, total, f"{detector.NAME} ({tier})")
            if tier not in batteries:
                batteries[tier] = Battery(seed, depth=tier, start=tier)
            try:
                finding = one(detector, subject, batteries[tier])
            except DeadlineReached:
                why = session.DEADLINE
                break
            found.setdefault(detector.NAME, []).append((tier, finding))
            if stop is not None and stop(finding) and i + 1 < len(todo):
                why = session.FIRST_FLAG
                break
    unreached = {tier: [d.NAME for d in chosen if d.NAME in found
                        and tier not in [t for t, _ in found[d.NAME]]]
                 for tier in tiers(depth)}
    findings = [merge(found[d.NAME]) for d in chosen if d.NAME in found]
    return findings, [d.NAME for d in chosen if d.NAME not in found], \
        {t: names for t, names in unreached.items() if names}, why


class Reach:
    """An executor that notes which values of the contract's input space each request it runs
    uses, read as ``attnzoo coverage`` reads them (its place in a detector's sequence of calls
    included), then runs it; nothing of the request is kept."""

    def __init__(self, executor, subject):
        from attnzoo.space_values import lesson_values, sdpa_values

        self.executor, self.subject, self.seen = executor, subject, set()
        self.read = sdpa_values if subject.target.contract == "sdpa" else lesson_values
        self.run_of, self.last, self.count = None, {}, 0

    def run(self, request):
        try:
            self._note(request)
        except Exception:  # noqa: BLE001 - what was reached is a report, never a verdict
            pass
        return self.executor.run(request)

    def _note(self, request):
        from attnzoo.space_values import _fingerprint

        if self.subject.run is not self.run_of:  # a new detector: a new sequence of calls
            self.run_of, self.last, self.count = self.subject.run, {}, 0
        key, place = _fingerprint(request), set()
        if key in self.last:
            place.add(("requests", "repeated" if self.last[key] == self.count - 1
                       else "repeated later"))
        self.last[key] = self.count
        self.count += 1
        if getattr(request, "swapped", False):  # read in SDPA's (..., H, L, E), as the call is
            request = replace(request, args=tuple(np.swapaxes(a, -3, -2) if np.ndim(a) >= 3
                                                  else a for a in request.args))
        self.seen |= {f"{axis}:{value}" for axis, value in self.read(request) | place}

    def fresh(self):
        """The worker restarted (a detector's new instance); still noted here."""
        self.executor = self.executor.fresh()
        return self

    def __getattr__(self, name):
        return getattr(self.executor, name)


def reached(findings, detectors, contract, seen):
    """What a budgeted run reached: per tier the detectors that ran there, the contract's
    clauses their properties state, and the values of the input space its calls used
    (``seen``, from :class:`Reach`)."""
    from reference import CLAUSES
    from reference.space import SPACES

    per_tier = {}
    for f in findings:
        for tier in getattr(f, "tiers", ()):
            per_tier.setdefault(tier, []).append(f.detector)
    ran = {f.detector for f in findings if str(f.verdict) != "n/a"}
    clauses = {c for name in ran for c in getattr(detectors.get(name), "CLAUSES", ())}
    space = [f"{axis.name}:{value.name}" for axis in SPACES[contract] for value in axis.values]
    # C1–C7 are every contract checked here, S1–S6 SDPA's; V1–V12 are varlen's (not checked yet)
    own = [c for c in CLAUSES if c[0] == "C" or (contract == "sdpa" and c[0] == "S")]
    return {"tiers": per_tier, "clauses": [c for c in own if c in clauses],
            "clauses_not_reached": [c for c in own if c not in clauses],
            "values": len([v for v in space if v in seen]), "of": len(space),
            "values_not_reached": [v for v in space if v not in seen]}
