"""docs/survey.json and docs/survey.md from the survey document.

The markdown opens with one row per implementation and version, then each implementation's
declared limits and its findings by root cause (``attnzoo.diagnosis``): one per feature the
failing cases share, with the smallest reproducing call and its reproduction, so a finding can
be filed upstream as it stands; the flagged detectors follow as detail. A run recorded before
the diagnosis existed lists the flagged detectors with their reproductions, as it did. The
conventions each library declares (empty rows, head grouping, layout) have a column of their
own, apart from the limits and the flagged counts; a document recorded before conventions were
declared has none.
"""

import json
from pathlib import Path

from attnzoo.diagnosis.features import EARLIER_CALLS
from attnzoo.survey import findings
from attnzoo.survey.capabilities import VOCABULARY
from detectors.kit.capabilities import ADAPTED, FLOAT64_AS_FLOAT32, FLOAT64_WORDS

FLAGGED = ("killed", "nan", "crashed", "hung")
EMPTY_ROWS = {"zero": "zero weights and a zero output row",
              "uniform": "weight 1/S on each of the S keys, the output the mean of the values"}
SNIPPET_LINES = 30  # longer reproductions stay in the JSON only


def write(doc, folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "survey.json", folder / "survey.md"
    paths[0].write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(doc), encoding="utf-8")
    return paths


def refused_cases(run):
    """The cases the library refused at run time (set aside for that case only, as the
    harness does with a refusal), over every detector of one run."""
    return sorted({case for f in run["findings"]
                   for case, why in (f.get("unsupported") or {}).items()
                   if why.startswith("refused:")})


def cell(run):
    s = run["summary"]
    # a run-time refusal is a case set aside; surveys written before that was so scored it
    # as a crashed finding marked "refusal", and still read as they were written
    refused = len(refused_cases(run)) + sum(1 for f in run["findings"] if f["refusal"])
    text = f"{s['flagged']} flagged, {s['passed']} ok, {s['not_applicable']} n/a"
    if s.get("unsupported"):
        text += f", {s['unsupported']} unsupported"
    if s.get("errors"):  # a fault of attnzoo, never of the library: shown, so it gets fixed
        text += f", {s['errors']} detector error{'s' if s['errors'] != 1 else ''}"
    aside = []
    if s.get("not_run") or s.get("unreached"):
        aside.append("budget spent: " + ", ".join(
            words for words in (f"{s['not_run']} not run" if s.get("not_run") else "",
                                f"{s['unreached']} short of {run.get('depth')}"
                                if s.get("unreached") else "") if words))
    if s.get("cases_unsupported"):
        n = s["cases_unsupported"]
        aside.append(f"{n} case{'s' if n != 1 else ''} set aside")
    if refused:
        aside.append(f"{refused} refused")
    return text + (f" ({', '.join(aside)})" if aside else "")


def depth_words(doc):
    """The tier and the time each implementation had; a survey from before both: quick."""
    if "depth" not in doc:
        return " Battery: the quick tier, every detector to its end."
    limit = (f"until {doc['budget']:g} s per implementation and dtype are spent"
             if doc.get("budget") else "with no time limit")
    return (f" Battery: the {doc['depth']} tier, in the order `attnzoo check --budget` uses: "
            "units of one detector on the cases one tier adds, the most telling first (measured "
            f"from the kill matrix), {limit}; a row says what the time did not reach."
            + (" A library's first call of each shape in each worker is its warm-up (a "
               "compile, a cache fill): its time goes back to the budget, up to the budget "
               "once more."
               if doc.get("budget") and _warmups(doc) else ""))


def _warmups(doc):
    """Whether the survey recorded warm-ups (surveys written before did not)."""
    return any("warmup" in r for row in doc["implementations"] for r in row["runs"])


def budget_lines(run):
    """What a run's budget left: detectors not run, and those short of the survey's tier."""
    out = []
    if run.get("not_run"):
        out.append(f"Not run (the budget was spent first): {', '.join(run['not_run'])}.")
    for tier, names in (run.get("unreached") or {}).items():
        out.append(f"Not run at the {tier} tier (the budget was spent first): "
                   f"{', '.join(names)}.")
    return out


def warmup_lines(run):
    """The time the library's first call of each shape took, given back to the budget (a
    compile is no check); runs that spent under a second say nothing."""
    warm = run.get("warmup") or {}
    if warm.get("seconds", 0) < 1:
        return []
    return [f"Warm-up: the first call of each shape ({warm['calls']} calls) took "
            f"{warm['seconds']:g} s, given back to the budget."]


def convention(row):
    """The row's declared empty-row convention, linked to where the library says so."""
    link = row.get("empty_rows_docs")
    return f"[{row['empty_rows']}]({link})" if link else row["empty_rows"]


def conventions(row):
    """Every convention the row declares, each linked where the library shows it: its empty
    rows, a causal alignment other than top-left, and the head grouping and layout the harness
    adapts."""
    words = [f"empty rows {convention(row)}"]
    if row.get("causal_alignment", "top-left") != "top-left":
        words.append(f"is_causal {row['causal_alignment']}")
    if row.get("gqa_grouping_docs"):
        words.append(f"head groups [interleaved]({row['gqa_grouping_docs']})")
    for word in sorted(FLOAT64_AS_FLOAT32 & set(row["unsupported"])):
        words.append(f"float64 inputs [{FLOAT64_WORDS[word]}]({row.get('float64_docs')})")
    if "layout=BLHE" in row["unsupported"]:
        words.append("layout (N, L, H, E)")
    return "; ".join(words)


def limits(row):
    """What the row declares it does not support: its words less the adapted conventions."""
    return [w for w in row["unsupported"] if w not in ADAPTED]


def markdown(doc, reviews=None):
    """The page; ``reviews`` ({name: {key: Review}}) defaults to the adapters' FINDINGS."""
    reviews = findings.reviews() if reviews is None else reviews
    rows = doc["implementations"]
    dtypes = sorted({r["dtype"] for row in rows for r in row["runs"]}, reverse=True)
    declared = any("empty_rows" in row for row in rows)  # recorded since they are declared
    out = [
        "# Survey: the detectors on the attention people use",
        "",
        "Generated by `attnzoo survey` (seed {seed}, Python {python}, {platform}); do not edit by "
        "hand.".format(**doc) + depth_words(doc) + " Each implementation runs through an "
        "adapter in `attnzoo/survey/adapters/` that converts layouts, mask conventions and "
        "array types only; cases using a feature the adapter declares unsupported are set "
        "aside, not scored. A *refused* crash is one whose message the declaration names (a "
        "run-time refusal, not a divergence)."
        + (" A *refused* case is one the library refused at run time with such a message (or "
           "torch's \"No available kernel\"): it is set aside for that case only, and every "
           "detector runs the cases that remain." if any(refused_cases(r) for row in rows
                                                         for r in row["runs"]) else "")
        + (" *Conventions* are what the library declares where libraries legitimately differ: "
           "*empty rows* is what a query with no allowed key gives (zero: "
           f"{EMPTY_ROWS['zero']}, as PyTorch since 2.5; uniform: {EMPTY_ROWS['uniform']}, as a "
           "large negative fill gives), linked to where the library says or does so: the "
           "detectors judge each library by its own convention; *head groups* and *layout* the "
           "harness adapts before any detector runs. None of them is a finding, and none is in "
           "the flagged counts." if declared else ""),
        "",
        "| implementation | version | declared unsupported | " + ("conventions | " if declared
                                                                 else "")
        + " | ".join(dtypes) + " |",
        "| --- | --- | --- | " + ("--- | " if declared else "")
        + " | ".join("---" for _ in dtypes) + " |",
    ]
    for row in rows:
        by = {r["dtype"]: r for r in row["runs"]}
        cells = [cell(by[d]) if d in by else ("skipped" if row["skipped"] else "—")
                 for d in dtypes]
        out.append(f"| {row['name']} ({row['title']}) | {row['version'] or 'not installed'} | "
                   f"{', '.join(limits(row)) or 'none'} | "
                   + (f"{conventions(row)} | " if declared else "") + " | ".join(cells) + " |")
    words = {k: v for k, v in VOCABULARY.items() if k not in ADAPTED}
    out += ["", "Capabilities vocabulary: " + "; ".join(f"`{k}`: {v}"
                                                      for k, v in words.items()) + ".", ""]
    adapted = sorted({w for row in rows for w in row["unsupported"] if w in ADAPTED})
    if adapted:  # not limits: the harness adapts the calls, every case runs
        out += ["Conventions declared, adapted by the harness: "
                + "; ".join(f"`{w}`: {VOCABULARY[w]}" for w in adapted) + ".", ""]
    for row in rows:
        out += section(row, reviews.get(row["name"], {}))
    return "\n".join(out) + "\n"


def section(row, reviewed=None):
    out = [f"## {row['name']} {row['version'] or ''}".rstrip(), "",
           f"{row['title']} — adapter `{row['adapter']}`, docs {row['docs'] or '-'}.", ""]
    if row["skipped"]:
        return out + [f"Skipped: {row['skipped']}", ""]
    out.append(f"Declared unsupported: {', '.join(limits(row)) or 'nothing'}"
               + (f"; refusals it names: {', '.join(repr(r) for r in row['refuses'])}"
                  if row["refuses"] else "")
               + f"; is_causal aligned {row['causal_alignment']}"
               + (f"; a query with no allowed key gets {EMPTY_ROWS[row['empty_rows']]} "
                  f"(empty rows {convention(row)})" if "empty_rows" in row else "")
               + ("; grouped query heads interleaved, query head h reading key/value head h mod "
                  f"H_kv ([where it does so]({row['gqa_grouping_docs']}); the harness reorders "
                  "the heads, so it is no finding)" if row.get("gqa_grouping_docs") else "")
               + ("; laid out (N, L, H, E), which the harness transposes"
                  if "layout=BLHE" in row["unsupported"] else "") + ".")
    for run in row["runs"]:
        out += ["", f"### {row['name']} at {run['dtype']}"
                + (f", {run['depth']}" if run.get("depth") else "") + f": {cell(run)}", ""]
        if run["detectors_not_run"]:
            out.append(f"Not run (declared unsupported): {', '.join(run['detectors_not_run'])}.")
        out += budget_lines(run) + warmup_lines(run)
        if run["cases_set_aside"]:
            out.append(f"Cases set aside: {', '.join(run['cases_set_aside'])}.")
        if refused_cases(run):
            out.append(f"Refused at run time: {', '.join(refused_cases(run))}.")
        flagged = [f for f in run["findings"] if f["verdict"] in FLAGGED]
        if not flagged:
            out.append("No detector flagged it.")
        if run.get("diagnosis"):
            out += root_causes(row, run, reviewed or {})
            out += ["", "Flagged detectors (detail):", ""]
            out += [f"- **{f['detector']}** ({'refused' if f['refusal'] else f['verdict']}): "
                    f"{f['message']}" for f in flagged]
            continue
        for f in flagged:
            kind = "refused" if f["refusal"] else f["verdict"]
            out += ["", f"- **{f['detector']}** ({kind}): {f['message']}"]
            snippet = (f["evidence"] or {}).get("snippet", "").splitlines()
            if f["refusal"] or not snippet:
                continue
            if len(snippet) > SNIPPET_LINES:  # the arrays are in the JSON, runnable as they are
                out.append(f"  Reproduction: {len(snippet)} lines, in survey.json under this "
                           "finding's evidence.snippet.")
                continue
            out += ["", "  ```python"] + [f"  {s}" for s in snippet] + ["  ```"]
    return out + [""]


def root_causes(row, run, reviewed):
    """One entry per root cause, written to be filed upstream as it stands."""
    groups = run["diagnosis"]
    n = sum(1 for g in groups if g["feature"])
    out = [f"Findings by root cause: {n}" + (" and failures no single feature explains"
                                             if n < len(groups) else "") + "."]
    for i, g in enumerate(groups, 1):
        s = g["smallest"]
        title = g["explains"] if g["feature"] else g["explains"].capitalize()
        # a crash that needs the earlier calls of its process: its call alone answers, so the
        # script shows the call, not the crash
        alone = EARLIER_CALLS in (g.get("features") or ())
        call = ("The call that died (alone in a fresh process it answers: the crash needs the "
                "calls its process answered before)" if alone else "Smallest reproducing call")
        out += ["", f"#### {i}. {row['name']} {row['version']} at {run['dtype']}: {title}", "",
                g["sentence"], "", findings.line(reviewed.get(findings.key(run, g))), "",
                f"{call} (case `{s['case']}`, {s['verdict']} by "
                f"`{s['detector']}`): `{s['call']}`", "", f"What it does: {s['message']}"]
        snippet = s["snippet"].splitlines()
        if len(snippet) > SNIPPET_LINES:
            out += ["", f"Reproduction: {len(snippet)} lines, in survey.json under this "
                    "implementation's diagnosis (smallest.snippet)."]
        elif snippet:
            out += ["", "```python"] + snippet + ["```"]
    return out
