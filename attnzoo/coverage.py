"""``attnzoo coverage``: which detectors reach each value of the input space, read off the calls.

Coverage is measured, not declared: every detector runs on the reference at a depth, every
call it sends is recorded, and each call is read for the values of ``reference.space`` it
uses (:mod:`attnzoo.space_values`) — from the arrays and keywords actually sent, never from a
case's or a detector's name.
A call with an upstream gradient (or a gradcheck) reaches values *through gradients*; any other
call reaches them *forward*. A value of the space that no detector reaches at deep, and that
does not say why (``Value.gap``, ``Value.no_gradient``), is a gap: ``coverage_gaps`` lists it
and the coverage test fails on it.
"""

import json
import sys
from pathlib import Path

from attnzoo.matrix.model import rows, subject_for
from attnzoo.runner import run
from attnzoo.space_values import lesson_values, sdpa_values, sequence
from detectors import all_detectors
from detectors.kit.battery import Battery
from detectors.kit.depths import DEPTHS
from reference.space import BACKWARD, SPACES

# The contracts measured through the matrix, by the reference row their detectors run on; the
# varlen contract's detectors run on its own reference through detectors.kit.varlen.
ROWS = {"sdpa": "reference-sdpa", "lesson": "reference-numpy"}
CONTRACTS = (*ROWS, "varlen")


class Recorder:
    """An executor that notes every request it runs, then runs it."""

    def __init__(self, executor, sink):
        self.executor, self.sink = executor, sink

    def run(self, request):
        self.sink.append(request)
        return self.executor.run(request)

    def fresh(self):
        """A new instance of the implementation (call_order_independence asks for one): its
        calls are noted as well."""
        self.executor = self.executor.fresh()
        return self

    def __getattr__(self, name):
        return getattr(self.executor, name)


def measure(contract, depth, seed=0):
    """``{"axis:value": {"forward": [detectors], "backward": [detectors]}}`` on the reference."""
    if contract == "varlen":
        return measure_varlen(depth, seed)
    row = next(r for r in rows(depth) if r.label == ROWS[contract])
    read = sdpa_values if contract == "sdpa" else lesson_values
    reached = {}
    battery = Battery(seed, depth=depth)
    for detector in all_detectors():
        subject, sent = subject_for(row), []
        subject.executor = Recorder(subject.executor, sent)
        run(detector, subject, battery)
        for request, place in zip(sent, sequence(sent)):
            way = "backward" if request.grad is not None or request.gradcheck else "forward"
            for axis, value in read(request) | place:
                reached.setdefault(f"{axis}:{value}", {"forward": set(), "backward": set()})[
                    way].add(detector.NAME)
    return {k: {w: sorted(d) for w, d in ways.items()} for k, ways in reached.items()}


def measure_varlen(depth, seed=0):
    """The varlen detectors on the varlen reference at every dtype: each call's values are
    read from what it sent (``Case.values`` of ``Subject.calls``); a call whose q requires grad
    is the gradient detector's and reaches its values through gradients."""
    from detectors import varlen_detectors
    from detectors.kit import varlen
    from detectors.kit.verdict import NotApplicable
    from reference.varlen import attn_varlen

    reached = {}
    for detector in varlen_detectors():
        for dtype in varlen.DTYPES.values():
            subject = varlen.Subject(varlen.Target(attn_varlen, "reference"), dtype, seed, depth)
            try:
                detector.check(subject)
            except (varlen.VarlenMismatch, NotApplicable):
                pass  # the reference passes (tests/test_varlen_detectors.py): calls still count
            for call in subject.calls:
                way = "backward" if call.q.requires_grad else "forward"
                for axis, value in call.values:
                    reached.setdefault(f"{axis}:{value}", {"forward": set(), "backward": set()})[
                        way].add(detector.NAME)
    return {k: {w: sorted(d) for w, d in ways.items()} for k, ways in reached.items()}


def coverage(depths=DEPTHS, seed=0, contracts=CONTRACTS):
    """``{contract: {depth: measure(...)}}``."""
    return {c: {d: measure(c, d, seed) for d in depths} for c in contracts}


def gaps(found, contract, depth="deep"):
    """Values of ``contract``'s space that no relation reaches at ``depth`` and that do not say
    why: ``[(axis:value, "forward" | "backward")]``."""
    reached, missing = found[contract][depth], []
    for axis in SPACES[contract]:
        for value in axis.values:
            key = f"{axis.name}:{value.name}"
            ways = reached.get(key, {"forward": [], "backward": []})
            if not ways["forward"] and not value.gap:
                missing.append((key, "forward"))
            if not ways["backward"] and not (value.no_gradient or value.gap
                                             or BACKWARD[contract]):
                missing.append((key, "backward"))
    return missing


def stale(found, contract, depth="deep"):
    """Values that say why nothing reaches them although something does: ``[(value, way)]``."""
    reached, out = found[contract][depth], []
    for axis in SPACES[contract]:
        for value in axis.values:
            ways = reached.get(f"{axis.name}:{value.name}", {"forward": [], "backward": []})
            if value.gap and ways["forward"]:
                out.append((f"{axis.name}:{value.name}", "forward"))
            if value.no_gradient and ways["backward"]:
                out.append((f"{axis.name}:{value.name}", "backward"))
    return out


def problems(found, depth="deep"):
    """One line per gap (a value nothing reaches that says no reason) and per stale reason."""
    lines = []
    for contract in found:
        lines += [f"{contract} {key}: no {'gradient' if way == 'backward' else 'forward'} "
                  "relation reaches it at deep, and reference/space.py says no reason"
                  for key, way in gaps(found, contract, depth)]
        lines += [f"{contract} {key}: reached {way} at deep, yet reference/space.py says "
                  "nothing reaches it: drop the reason"
                  for key, way in stale(found, contract, depth)]
    return lines


def render(found):
    """The text table: per contract and axis value, how many detectors reach it forward and
    through gradients at each depth, then who reaches it at the deepest depth measured, and
    the reason reference/space.py gives where no gradient relation reaches it there."""
    lines = []
    for contract, by_depth in found.items():
        depths = list(by_depth)
        lines.append(f"{contract} contract: detectors reaching each value, forward / through "
                     f"gradients, at {', '.join(depths)}")
        if BACKWARD[contract]:
            lines.append(f"  no gradient relation reaches any value: {BACKWARD[contract]}")
        for axis in SPACES[contract]:
            lines.append(f"  {axis.name} ({axis.clause}, {axis.about})")
            for value in axis.values:
                key = f"{axis.name}:{value.name}"
                counts = []
                for d in depths:
                    ways = by_depth[d].get(key, {"forward": [], "backward": []})
                    counts.append(f"{len(ways['forward']):>2}/{len(ways['backward']):<2}")
                last = by_depth[depths[-1]].get(key, {"forward": [], "backward": []})
                reached = last["forward"] or last["backward"]
                note = value.gap and not reached and f"gap: {value.gap}"
                who = ", ".join(reached[:6]) + (" …" if len(reached) > 6 else "") + (
                    " (through gradients)" if reached and not last["forward"] else "")
                lines.append(f"    {value.name:<16} {'  '.join(counts)}  "
                             f"{note or who or '(none)'}")
                if value.gap and reached:
                    lines.append(f"{'':<23}no forward relation: {value.gap}")
                if value.no_gradient and not value.gap and not last["backward"]:
                    lines.append(f"{'':<23}no gradient relation: {value.no_gradient}")
    return "\n".join(lines)


def to_json(found, seed):
    return json.dumps({"seed": seed, "coverage": found}, indent=1, sort_keys=True) + "\n"


def command(depths, contracts, seed, as_json, output):
    """``attnzoo coverage``: print the table (or JSON), write JSON where ``output`` names, and
    exit 1 when the deep coverage has a gap or a stale reason (one line each on stderr)."""
    depths = tuple(d for d in DEPTHS if d in (depths or DEPTHS))
    found = coverage(depths, seed, tuple(dict.fromkeys(contracts or CONTRACTS)))
    text = to_json(found, seed)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    print(text if as_json else render(found), end="" if as_json else "\n")
    lines = problems(found) if "deep" in depths else []
    for line in lines:
        print(f"coverage: {line}", file=sys.stderr)
    return 1 if lines else 0
