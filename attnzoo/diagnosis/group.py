"""The diagnosis: a check's failing cases grouped by the one feature they share.

Input: each flagged detector's per-case outcomes (``finding.cases``, see ``follow``). A *pair*
is one failing case of one detector, with the features the case uses (``features``).

How it decides:
1. Greedy cover. Among the features of the pairs not yet grouped, take the one that best
   explains them: the most pairs covered, weighted by precision within the detectors involved
   (covered / (covered + passing cases of those detectors that have the feature)); ties go to
   the more specific feature (the order of the feature tables). Its pairs form a group; repeat.
2. Evidence. A group is attributed to its feature only when every failing case in it has the
   feature (true by construction) and the cases without it pass: in each of its detectors,
   every failing case lacking the feature belongs to another attributed group, and at least
   one detector of the group ran to the end and passed a case without the feature. A detector
   that breaks this leaves the group (iterated to a fixpoint); what is left unattributed goes
   to one group that says "no single feature explains these", never to a guessed cause.
"""

from attnzoo.diagnosis import features

UNEXPLAINED = "no single feature explains these"


def diagnose(findings):
    """Groups (dicts, largest first, the unexplained last) from findings in their JSON form."""
    pairs, passes, complete, order = [], {}, {}, []
    for f in findings:
        cases = f.get("cases") or {}
        if f["verdict"] not in ("killed", "nan", "crashed", "hung"):
            continue
        d = f["detector"]
        order.append(d)
        failed = cases.get("failed") or {(f.get("evidence") or {}).get("case") or "?": {
            "verdict": f["verdict"], "message": f["message"], "features": [], "size": None,
            "call": (f.get("evidence") or {}).get("call", ""),
            "snippet": (f.get("evidence") or {}).get("snippet", "")}}
        pairs += [(d, key, frozenset(r.get("features", ())), r) for key, r in failed.items()]
        passes[d] = [frozenset(r.get("features", ())) for r in cases.get("passed", {}).values()]
        complete[d] = bool(cases.get("complete"))
    if not pairs:
        return []
    groups = _cover(pairs, passes)
    kept = _evidence(groups, pairs, passes, complete)
    kept.pop(None)
    out = [_describe(f, [u for u in g if u[0] in kept[f]], passes, order)
           for f, g in groups.items() if kept[f]]
    out.sort(key=lambda g: (-len(g["cases"]), features.rank(g["feature"])))
    lost = [u for f, g in groups.items() for u in g if u[0] not in kept[f]]
    lost += [u for u in pairs if not u[2]]
    if lost:
        out.append(_describe(None, lost, passes, order))
    return out


def _cover(pairs, passes):
    """feature -> its pairs, chosen greedily (step 1 of the module docstring)."""
    remaining = [u for u in pairs if u[2]]
    groups = {}
    while remaining:
        best = max({f for u in remaining for f in u[2]},
                   key=lambda f, left=remaining: _score(f, left, passes))
        groups[best] = [u for u in remaining if best in u[2]]
        remaining = [u for u in remaining if best not in u[2]]
    return groups


def _score(f, remaining, passes):
    """Pairs covered, weighted by precision in their detectors; then the more specific."""
    cover = [u for u in remaining if f in u[2]]
    dets = {u[0] for u in cover}
    with_f = sum(f in p for d in dets for p in passes[d])
    return (len(cover) ** 2 / (len(cover) + with_f), -features.rank(f))


def _evidence(groups, pairs, passes, complete):
    """feature -> the detectors whose evidence supports it (step 2), iterated to a fixpoint."""
    kept = {f: {u[0] for u in g} for f, g in groups.items()}
    home = {(u[0], u[1]): None for u in pairs if not u[2]}  # a case with no feature: unexplained
    home |= {(u[0], u[1]): f for f, g in groups.items() for u in g}
    kept[None] = set()
    changed = True
    while changed:
        changed = False
        for f, dets in kept.items():
            for d in sorted(dets):  # a failing case of d without f must be explained elsewhere
                others = [g for (d2, _), g in home.items() if d2 == d and g != f]
                if any(d not in kept[g] for g in others):
                    dets.discard(d)
                    changed = True
            if dets and not any(complete[d] and any(f not in p for p in passes[d])
                                for d in dets):
                dets.clear()
                changed = True
    return kept


def _describe(feature, group, passes, order):
    dets = sorted({u[0] for u in group}, key=order.index)
    n = len(group)
    smallest = min(group, key=lambda u: (u[3].get("size") is None, u[3].get("size") or 0,
                                         order.index(u[0]), u[1]))
    cases = sorted({u[1] for u in group})
    verdicts = {}
    for u in group:
        verdicts[u[3].get("verdict", "")] = verdicts.get(u[3].get("verdict", ""), 0) + 1
    how = ", ".join(f"{k} {v}" for v, k in sorted(verdicts.items(), key=lambda x: -x[1]))
    where = f"{n} failing case{'s' if n != 1 else ''} ({how}) in {', '.join(dets)}"
    if feature is None:
        sentence = f"No single feature explains these: {where}."
        without = 0
    else:
        without = sum(feature not in p for d in dets for p in passes[d])
        sentence = (f"{where} all use {features.phrase(feature)}; the {without} "
                    f"case{'s' if without != 1 else ''} of those detectors without it "
                    f"pass{'' if without != 1 else 'es'}.")
    record = smallest[3]
    return {
        "feature": feature,
        "explains": features.phrase(feature) if feature else UNEXPLAINED,
        "sentence": sentence,
        "detectors": dets,
        "cases": cases,
        "failing": n,
        "passing_without": without,
        "smallest": {"detector": smallest[0], "case": smallest[1],
                     "verdict": record.get("verdict", ""), "call": record.get("call", ""),
                     "message": record.get("message", ""), "snippet": record.get("snippet", "")},
    }
