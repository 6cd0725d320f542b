"""The conformance report of ``attnzoo check``: one line per detector, then a summary.

The JSON form is documented in docs/check-json.md; its ``schema`` field changes when a field
changes meaning, never silently.
"""

from attnzoo.diagnosis import known
from attnzoo.inert import inert
from attnzoo.vocabulary import VERDICTS
from detectors.kit.capabilities import float64_inputs, grouping, layout, limits
from detectors.kit.conventions import declared as convention
from detectors.kit.verdict import (
    CAUGHT,
    CRASHED,
    ERROR,
    HUNG,
    KILLED,
    NA,
    NAN,
    SURVIVED,
    UNSUPPORTED,
)

# 2: per-implementation "diagnosis", per-finding "cases"; 3: "deadline", and exit code 4 for a
# run it cut short with nothing flagged (2 was bad input's code too); 4: "budget", per
# implementation "stopped", "reached" and "unreached", per finding "tiers"
SCHEMA = "attnzoo.check/4"
INCOMPLETE = 4  # the exit code of a run the deadline cut short with nothing flagged
LAYOUT_WORDS = {"BHLE": "(N, H, L, E)", "BLHE": "(N, L, H, E)"}
WORDS = {name: v.word for name, v in VERDICTS.items()}


def summarise(findings, not_run=(), unreached=None):
    """Counts over the findings; ``not_run`` names detectors a --deadline stopped, and
    ``unreached`` ({tier: names}) those a --budget stopped short of a tier."""
    counts = {v: sum(1 for f in findings if f.verdict == v) for v in WORDS}
    flagged = sum(counts[v] for v in CAUGHT)
    return {
        "detectors": len(findings),
        "passed": counts[SURVIVED],
        "flagged": flagged,
        "killed": counts[KILLED],
        "nan": counts[NAN],
        "crashed": counts[CRASHED],
        "hung": counts[HUNG],
        "not_applicable": counts[NA],
        "unsupported": counts[UNSUPPORTED],
        "cases_unsupported": sum(len(f.unsupported) for f in findings),
        "errors": counts[ERROR],
        "not_run": len(not_run),
        "unreached": sum(len(names) for names in (unreached or {}).values()),
        "conformant": flagged == 0 and counts[ERROR] == 0 and counts[SURVIVED] > 0
        and not not_run and not any((unreached or {}).values()),
        "seconds": round(sum(f.seconds for f in findings), 3),
        "impl_seconds": round(sum(f.impl_seconds for f in findings), 3),
        "calls": sum(f.calls for f in findings),
    }


def describe_target(target, dtype, seed, manifest=None):
    """The target as the report names it; ``unsupported`` are the declared limits, from the
    command line and from ``ATTNZOO_UNSUPPORTED`` beside the callable; ``empty_rows`` the
    convention judged (detectors.kit.conventions.declared)."""
    declared = set(target.unsupported) | set(getattr(manifest, "unsupported", ()) or ())
    refuses = tuple(target.refuses) + tuple(getattr(manifest, "refuses", ()) or ())
    return {
        "name": target.name,
        "locator": target.locator,
        "contract": target.contract,
        "backend": target.backend,
        "mask_convention": target.mask_convention,
        "causal_alignment": target.causal_alignment,
        "empty_rows": convention(target, manifest),
        "device": target.device,
        "dtype": dtype,
        "seed": seed,
        "unsupported": sorted(limits(declared)),
        "refuses": list(refuses),
        "layout": layout(declared),  # BHLE: (N, H, L, E); BLHE: declared, adapted by attnzoo
        "gqa_grouping": grouping(declared),  # contiguous (SDPA's); interleaved: adapted too
        "float64_inputs": float64_inputs(declared),  # a documented float32 path, if declared
    }


def check_text(sections, detectors, options, document, verbose=False):
    """What ``attnzoo check`` prints without --json (stdout, no final newline): the isolation
    line, each implementation's report, and the expectations' lines when a file was given."""
    from attnzoo.sandbox.session import isolation_words

    out = isolation_words(options) + "\n" + "\n\n".join(
        text(s, detectors, verbose) for s in sections)
    if options.expect is not None:
        lines = document["expectations"]["lines"]
        out += f"\nexpectations from {options.expect}:\n" + (
            "\n".join("  " + ln for ln in lines) or "  none of them applies here")
    return out


def text(section, detectors, verbose=False):
    """Human report for one implementation: ``section`` has target, findings, summary."""
    t = section["target"]
    lines = [
        f"{t['name']}: {t['contract']} contract, {t['backend']} backend, "
        f"mask convention {t['mask_convention']}, causal alignment {t['causal_alignment']}, "
        + (f"empty rows {t['empty_rows']}, " if t.get("empty_rows", "zero") != "zero" else "")
        + f"{t['dtype']}" + (f" on {t['device']}" if t["backend"] == "torch" else "")
        + f", seed {t['seed']}"
    ]
    if t.get("unsupported"):
        lines.append(f"  declared unsupported: {', '.join(t['unsupported'])}")
    if t.get("layout", "BHLE") != "BHLE":
        lines.append(f"  declared layout: {LAYOUT_WORDS[t['layout']]}: the harness transposes "
                     "query, key and value in and the answer out (the mask stays (N, H, L, S))")
    if t.get("gqa_grouping", "contiguous") != "contiguous":
        lines.append("  declared head grouping: interleaved (query head h reads key/value head "
                     "h mod H_kv): the harness reorders the query heads in and the answer out")
    if t.get("float64_inputs", "float64") != "float64":
        lines.append(f"  declared float64 inputs: {t['float64_inputs']}: float32 accuracy is "
                     "what it promises there, and only a coarser one is a finding")
    if t.get("refuses"):
        lines.append("  refusals it names: " + "; ".join(f"'{inert(r)}'" for r in t["refuses"]))
    lines += diagnosis_lines(section.get("diagnosis") or [], section.get("reproductions"),
                             section.get("resembles"))
    width = max((len(f.detector) for f in section["findings"]), default=0)
    for f in section["findings"]:
        prop = getattr(detectors.get(f.detector), "PROPERTY", "")
        lines.append(f"  {WORDS[f.verdict]:<7} {f.detector:<{width}}  {prop}")
        if f.verdict in CAUGHT or f.verdict == ERROR:
            lines.append(f"          {f.message}")
            if f.evidence is not None and f.evidence.case:
                lines.append(f"          case: {f.evidence.case}")
            shrunk = f.evidence.shrunk if f.evidence is not None else None
            lines += shrunk_lines(shrunk)
            snippet = (shrunk or {}).get("snippet") or (f.evidence and f.evidence.snippet)
            if snippet:
                lines.append("          reproduce:" + (" (the smallest case)" if shrunk and
                                                       shrunk.get("snippet") else ""))
                lines += ["            " + s for s in snippet.splitlines()]
        elif f.verdict == NA and verbose or f.verdict == UNSUPPORTED:
            lines.append(f"          {f.message}")
        elif f.unsupported:
            lines.append(f"          {len(f.unsupported)} case"
                         f"{'s' if len(f.unsupported) > 1 else ''} unsupported"
                         + (f": {f.message}" if verbose else ""))
        for note in f.notes:
            lines.append(f"          note: {note}")
    s = section["summary"]
    parts = [f"{s['passed']} passed", f"{s['flagged']} flagged"]
    detail = [f"{s[k]} {k}" for k in ("killed", "nan", "crashed", "hung") if s[k]]
    if detail:
        parts[-1] += f" ({', '.join(detail)})"
    parts.append(f"{s['not_applicable']} n/a")
    if s.get("unsupported"):
        parts.append(f"{s['unsupported']} unsupported")
    if s["errors"]:
        parts.append(f"{s['errors']} detector error" + ("s" if s["errors"] != 1 else ""))
    if s.get("not_run"):
        parts.append(f"{s['not_run']} not run")
    if s.get("unreached"):
        parts.append(f"{s['unreached']} short of a tier")
    limit = "the budget ran out" if section.get("reached") else "the deadline passed"
    if s.get("not_run") and not s["flagged"]:
        verdict = f"incomplete: {limit} before {', '.join(section['not_run'])} ran"
    elif s.get("unreached") and not s["flagged"]:
        tier = [t for t, names in section["unreached"].items() if names][0]
        verdict = (f"incomplete: {limit} before {len(section['unreached'][tier])} detectors "
                   f"reached the {tier} tier")
    elif s["passed"] == 0 and s["flagged"] == 0 and not s["errors"]:
        verdict = "nothing was checked: no detector applies to this target"
    else:
        xfail = s.get("expected_failures", 0)
        verdict = ("NOT conformant" if not s["conformant"] else
                   f"conformant with {xfail} expected failure{'s' if xfail != 1 else ''}"
                   if xfail else "conformant")
    lines += reached_lines(section.get("reached"), section.get("unreached"),
                           len(section["findings"]) + len(section["not_run"]))
    lines.append(f"summary: {', '.join(parts)} in {s['seconds']:.1f} s — {verdict}")
    return "\n".join(lines)


def reached_lines(reached, unreached, detectors, shown=8):
    """What a --budget run reached: tiers, clauses, values of the input space."""
    if not reached:
        return []
    tiers = ", ".join(f"{'every detector' if len(names) == detectors else len(names)} at {tier}"
                      for tier, names in reached["tiers"].items())
    for tier in unreached or {}:
        if tier not in reached["tiers"]:
            tiers += f", none at {tier}"
    missing = reached["clauses_not_reached"]
    values = reached["values_not_reached"]
    return [f"reached: {tiers or 'nothing'}",
            f"  clauses: {', '.join(reached['clauses']) or 'none'}"
            + (f" (not reached: {', '.join(missing)})" if missing else ""),
            f"  input-space values: {reached['values']} of {reached['of']}"
            + (f" (not reached: {', '.join(values[:shown])}"
               + (f" and {len(values) - shown} more" if len(values) > shown else "") + ")"
               if values else "")]


def diagnosis_lines(groups, reproductions=None, resembles=None):
    """The report's opening: one root cause per group, its sentence and its smallest case, and
    the reproduction written for it (``check --repro-dir``)."""
    from attnzoo.reproductions import lines as reproduction_lines

    if not groups:
        return []
    n = sum(1 for g in groups if g["feature"])
    lines = [f"diagnosis: {n} root cause{'s' if n != 1 else ''}"
             + (" and failures no single feature explains" if n < len(groups) else "")
             + " (per-detector detail below)"]
    for i, g in enumerate(groups, 1):
        lines.append(f"  {i}. {g['sentence']}")
        s = g["smallest"]
        lines.append(f"     smallest: case {s['case']} ({s['detector']}, {s['verdict']}): "
                     f"{s['call']}")
        if s.get("shrunk"):
            k = s["shrunk"]
            lines.append(f"     shrunk from case {k['from']} ({k['detector']}): {k['call']}")
        if reproductions:
            lines += reproduction_lines(reproductions[i - 1])
    lines += known.lines(resembles)
    lines.append("detectors:")
    return lines


def shrunk_lines(shrunk):
    """``failed at …; smallest failing …`` for a shrunk case, with its own message."""
    if not shrunk or shrunk.get("skipped"):
        return []
    tried = f"{shrunk['attempts']} rerun{'s' if shrunk['attempts'] != 1 else ''}, " \
        f"at most {shrunk['cap']}"
    if not shrunk.get("snippet"):
        return [f"          failed at {shrunk['from']}; no smaller case fails ({tried})"]
    return [f"          failed at {shrunk['from']}; smallest failing {shrunk['to']} ({tried})",
            f"          smallest: {shrunk['message']} [{shrunk['call']}]"]


def exit_code(sections):
    """0 when nothing is flagged, 1 when any detector flags, 3 when a detector itself failed."""
    if any(s["summary"]["flagged"] for s in sections):
        return 1
    if any(s["summary"]["errors"] for s in sections):
        return 3
    return 0
