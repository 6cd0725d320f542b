"""The diagnosis: a check's failing cases grouped by the one feature they share.

Input: each flagged detector's per-case outcomes (``finding.cases``, see ``follow``). A *pair*
is one failing case of one detector, with the features the case uses (``features``).

How it decides:
1. Greedy cover. Among the features of the pairs not yet grouped, and the pairs of features
   that occur together in one case (a defect may need both: a mask *and* float16), take the
   one that best explains them: the most pairs covered, weighted by precision within the
   detectors involved (covered / (covered + passing cases of those detectors that have it));
   ties go to a single feature over a pair, then to the more specific one (the order of the
   feature tables). Its pairs form a group; repeat.
2. Evidence. A group is attributed to its feature only when every failing case in it has the
   feature (true by construction) and the cases without it pass: in each of its detectors,
   every failing case lacking the feature belongs to another attributed group, and at least
   one detector of the group ran to the end and passed a case without the feature. A detector
   that breaks this leaves the group (iterated to a fixpoint); what is left unattributed goes
   to one group that says "no single feature explains these", never to a guessed cause. The
   exception is a detector that declares its ``CAUSE`` (its cases carry that feature alone): a
   measurement of the inputs' precision is a finding about their dtype by construction, so it
   is its own evidence, and a library whose softmax runs in float32 gets a group "float64
   inputs" instead of an unexplained one.
3. Refinement. A group whose features include another attributed group's joins that one (all
   their cases have the smaller set, so it explains both) and is listed as a refinement: in its
   detectors, the cases fail only where they have the extra feature too.
4. Variants. A case left unexplained that is a detector's own variant of a battery case (its
   ``spec``) whose failures all lie in one attributed group joins that group: the detector
   changed the case (masked every key, permuted the tokens) and it failed as the case did.
5. After the first. When one cause explains most failing cases, each further group says it
   was found among the cases left once those were set aside.
"""

from attnzoo.diagnosis import features

UNEXPLAINED = "no single feature explains these"


def diagnose(findings):
    """Groups (dicts, largest first, the unexplained last) from findings in their JSON form."""
    pairs, passes, complete, order, declared = [], {}, {}, [], set()
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
        if cases.get("cause"):
            declared.add(d)
    if not pairs:
        return []
    groups = _cover(pairs, passes)
    kept = _evidence(groups, pairs, passes, complete, declared)
    kept.pop(None)
    found = {f: [u for u in g if u[0] in kept[f]] for f, g in groups.items() if kept[f]}
    out = [_describe(f, g, passes, order, refined, declared)
           for f, g, refined in _merged(found)]
    out.sort(key=lambda g: (-len(g["cases"]), _rank(tuple(g["features"]))))
    lost = [u for f, g in groups.items() for u in g if u[0] not in kept[f]]
    lost += [u for u in pairs if not u[2]]
    lost = _join_variants(out, lost, found, order)
    _after_the_first(out, len(pairs))
    if lost:
        out.append(_describe(None, lost, passes, order))
    return out


def _join_variants(out, lost, found, order):
    """Step 4: the unexplained pairs that stay so; each of the others joins the group that
    holds every explained failure of its battery case."""
    owner = {}  # spec -> the groups of ``out`` its explained failures lie in, by id
    for f, g in found.items():
        group = next(o for o in out if tuple(o["features"]) == f
                     or any(tuple(r["features"]) == f for r in o["refined"]))
        for u in g:
            owner.setdefault(u[3].get("spec"), {})[id(group)] = group
    left, joined = [], {}
    for u in lost:
        groups = owner.get(u[3].get("spec")) or {}
        if u[3].get("spec") and len(groups) == 1:
            group = next(iter(groups.values()))
            joined.setdefault(id(group), (group, []))[1].append(u)
        else:
            left.append(u)
    for group, pairs in joined.values():
        n = len(pairs)
        group["failing"] += n
        group["variants"] = n
        group["cases"] = sorted(set(group["cases"]) | {u[1] for u in pairs})
        group["detectors"] = sorted(set(group["detectors"]) | {u[0] for u in pairs},
                                    key=order.index)
        group["sentence"] += (f" {n} more failing case{'s' if n != 1 else ''} "
                              f"({'variants' if n != 1 else 'a variant'} a detector made of such "
                              "cases) join it.")
    return left


def _after_the_first(out, total):
    """Step 5: say what the later groups were found among, when the first explains most."""
    if len(out) < 2 or out[0]["failing"] * 2 <= total:
        return
    left = total - out[0]["failing"]
    for g in out[1:]:
        g["sentence"] = (f"Of the {left} failing case{'s' if left != 1 else ''} left after "
                         f"{out[0]['explains']}, " + g["sentence"][0].lower() + g["sentence"][1:])


def _has(f, feats):
    """Does a case with features ``feats`` have ``f`` (one feature name, or a tuple of them)?"""
    return all(x in feats for x in f)


def _rank(f):
    return (len(f), max(features.rank(x) for x in f))


def _candidates(remaining):
    """Single features, and pairs of features met together in one failing case."""
    out = set()
    for u in remaining:
        names = sorted(u[2], key=features.rank)
        out |= {(x,) for x in names}
        out |= {(x, y) for i, x in enumerate(names) for y in names[i + 1:]}
    return out


def _cover(pairs, passes):
    """feature (a tuple of names) -> its pairs, chosen greedily (step 1 of the docstring)."""
    remaining = [u for u in pairs if u[2]]
    groups = {}
    while remaining:
        best = max(_candidates(remaining), key=lambda f, left=remaining: _score(f, left, passes))
        groups[best] = [u for u in remaining if _has(best, u[2])]
        remaining = [u for u in remaining if not _has(best, u[2])]
    return groups


def _score(f, remaining, passes):
    """Pairs covered, weighted by precision in their detectors; then the simpler, the more
    specific."""
    cover = [u for u in remaining if _has(f, u[2])]
    dets = {u[0] for u in cover}
    with_f = sum(_has(f, p) for d in dets for p in passes[d])
    # last, every feature's specificity: two candidates never tie, so the choice never
    # depends on the order of a set
    ranks = tuple(sorted(-features.rank(x) for x in f))
    return (len(cover) ** 2 / (len(cover) + with_f), tuple(-r for r in _rank(f)), ranks)


def _merged(found):
    """(feature, pairs, refinements): a group whose features include another group's joins it
    (every case of both has the smaller set, so the smaller explains both), and is kept as a
    refinement: in its detectors the cases fail only with the extra features."""
    out = {}
    for f in sorted(found, key=_rank):
        into = next((g for g in out if set(g) < set(f)), None)
        if into is None:
            out[f] = (list(found[f]), [])
        else:
            out[into][0].extend(found[f])
            out[into][1].append((f, found[f]))
    return [(f, pairs, refined) for f, (pairs, refined) in out.items()]


def _evidence(groups, pairs, passes, complete, declared=frozenset()):
    """feature -> the detectors whose evidence supports it (step 2), iterated to a fixpoint;
    a detector in ``declared`` supports the feature it declares by construction."""
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
            if dets and not dets <= declared and not any(
                    complete[d] and any(not _has(f, p) for p in passes[d]) for d in dets):
                dets.clear()
                changed = True
    return kept


def _describe(feature, group, passes, order, refined=(), declared=frozenset()):
    said = " together with ".join(features.phrase(x) for x in feature or ())
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
    without = 0 if feature is None else sum(not _has(feature, p) for d in dets
                                            for p in passes[d])
    if feature is None:
        sentence = f"No single feature explains these: {where}."
    elif set(dets) <= declared:
        sentence = (f"{where} all use {said}: what these detectors check is a property of "
                    "the inputs' dtype (its precision, or the dtype that comes back), so this "
                    "is one finding about the dtype itself.")
    else:
        sentence = (f"{where} all use {said}; the {without} "
                    f"case{'s' if without != 1 else ''} of those detectors without it "
                    f"pass{'' if without != 1 else 'es'}")
        for f, pairs in refined:
            extra = " together with ".join(features.phrase(x) for x in f if x not in feature)
            dets_f = sorted({u[0] for u in pairs}, key=order.index)
            sentence += (f"; {len(pairs)} of them, in {', '.join(dets_f)}, fail only where they "
                         f"also use {extra}")
        sentence += "."
    record = smallest[3]
    return {
        "feature": "+".join(feature) if feature else None,
        "features": list(feature or ()),
        "explains": said if feature else UNEXPLAINED,
        "sentence": sentence,
        "detectors": dets,
        "cases": cases,
        "failing": n,
        "refined": [{"features": list(f), "detectors": sorted({u[0] for u in pairs},
                                                               key=order.index),
                     "failing": len(pairs)} for f, pairs in refined],
        "passing_without": without,
        "variants": 0,  # step 4 counts those that join
        "smallest": {"detector": smallest[0], "case": smallest[1],
                     "verdict": record.get("verdict", ""), "call": record.get("call", ""),
                     "message": record.get("message", ""), "snippet": record.get("snippet", "")},
    }
