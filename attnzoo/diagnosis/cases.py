"""Which cases a flagged detector failed and which it passed, read off its one run.

The detector went on past its first failure (``subject.trial``, detectors.kit.outcomes), so
its record holds an outcome for every case it reached; nothing is rerun. A case *passed* when
it was sent and no trial it was sent in failed. ``complete`` says every case was reached: a
hang, :data:`~detectors.kit.outcomes.MAX_FAILED` failing cases, the deadline or a refusal no
trial could route around end a run early.
"""

from attnzoo.diagnosis import features
from detectors.kit.verdict import CRASHED, HUNG
from reference import FLOAT_DTYPES as FLOATS


def per_case(detector, subject, record):
    """``{"failed": {key: record}, "passed": {key: record}, "complete": bool, "stopped": why,
    "cause": …}`` where a record has the case's features, size and, when failed, its verdict,
    call, message and reproduction."""
    failed = {str(k): dict(_failure(o), spec=k.spec) for k, o in record.failed.items()}
    later = {str(k): o.evidence for k, o in record.failed.items() if o.evidence is not None}
    passed = {str(k): {} for k in record.passed()}
    sent = {str(k): v for k, v in record.sent.items()}
    stopped = record.stopped or (f"case {record.unfinished!r} was refused outside its trial"
                                 if record.unfinished else "")
    alignment = subject.target.causal_alignment
    cause = getattr(detector, "CAUSE", None)
    earlier = {str(k) for k, o in record.failed.items() if getattr(o.error, "earlier", 0)}
    for k, case in list(failed.items()) + list(passed.items()):
        call, request = sent.get(k, (None, None))
        dtype = request.dtype if request is not None else subject.base_dtype
        spec = features.of(call, request, subject.base_dtype, alignment) \
            if request is not None else []
        case["features"] = spec
        if cause == "dtype" and dtype in FLOATS:  # a property of the inputs' dtype: its feature
            if "verdict" not in case:  # a pass: both, so it counts as evidence either way
                case["features"] = sorted({*spec, f"dtype:{dtype}"}, key=features.rank)
            elif case["verdict"] not in (CRASHED, HUNG):  # a crash is no finding about dtypes
                case["features"] = [f"dtype:{dtype}"]
        if k in earlier:  # it answers alone: the crash belongs to the calls before it
            case["features"] = [features.EARLIER_CALLS]
        # (the causal mask's bool is not an input dtype: its case is read as any other)
        case["size"] = features.size(call) if call is not None else None
    return {"failed": failed, "passed": passed, "complete": not stopped,
            "stopped": stopped or "held", "cause": cause, "evidence": later}


def _failure(outcome):
    evidence = outcome.evidence
    return {"verdict": str(outcome.verdict), "message": outcome.message,
            "call": evidence.call if evidence is not None else "",
            "snippet": evidence.snippet if evidence is not None else ""}


def reproduce_smallest(diagnosis, findings):
    """Build the reproduction of each root cause's smallest case, the one the report prints
    (the other failing cases' reproductions are never built)."""
    by = {f.detector: (f.cases or {}).get("evidence", {}) for f in findings}
    shrunk = [(f.detector, f.evidence.shrunk) for f in findings
              if f.evidence is not None and (f.evidence.shrunk or {}).get("call")]
    for group in diagnosis:
        smallest = group.get("smallest") or {}
        evidence = by.get(smallest.get("detector"), {}).get(smallest.get("case"))
        if evidence is not None and not smallest.get("snippet"):
            smallest["snippet"] = evidence.resolve().snippet
        smallest["shrunk"] = _shrunk_in(group, shrunk)


def _shrunk_in(group, shrunk):
    """The smallest call a shrink reached from one of the group's failing cases, by one of its
    detectors (each flagged detector shrinks its first failing case), or None."""
    mine = [(d, s) for d, s in shrunk
            if d in group.get("detectors", ()) and s.get("case") in group.get("cases", ())]
    if not mine:
        return None
    detector, s = min(mine, key=lambda u: sum((u[1].get("sizes") or {}).values()))
    return {"detector": detector, "from": s["case"], "call": s["call"],
            "message": s.get("message", ""), "snippet": s.get("snippet", "")}


def lighten(findings):
    """Drop the failing cases' reproductions once the diagnosis has kept its smallest ones: a
    reproduction of a standard-depth case prints every input, tens of kB each."""
    for f in findings:
        (f.cases or {}).pop("evidence", None)  # objects, not JSON: the diagnosis is built
        for record in (f.cases or {}).get("failed", {}).values():
            record.pop("snippet", None)


def scripts(diagnosis, findings, target):
    """(text, why) per root cause: the standalone reproduction of its smallest case
    (detectors.kit.script), or None and why there is none. Built before :func:`lighten`
    drops the evidence."""
    from detectors.kit.script import NoScript

    by = {f.detector: (f.cases or {}).get("evidence", {}) for f in findings}
    out = []
    for i, group in enumerate(diagnosis, 1):
        smallest = group.get("smallest") or {}
        evidence = by.get(smallest.get("detector"), {}).get(smallest.get("case"))
        if evidence is None or evidence.scripted is None:
            out.append((None, "attnzoo kept no calls for this case"))
            continue
        try:
            out.append((evidence.scripted(about(group, i, len(diagnosis), target)), ""))
        except NoScript as e:
            out.append((None, str(e)))
    return out


def about(group, i, n, target):
    """The opening comment of a root cause's reproduction: what, where, and the message."""
    import textwrap

    s = group["smallest"]
    lines = [f"{target.name} ({target.locator}): root cause {i} of {n}, detector "
             f"{s['detector']}, case {s['case']!r}"]
    for text in (group["sentence"], s["message"]):
        lines += [""] + textwrap.wrap(text, 95, break_on_hyphens=False)
    return lines
