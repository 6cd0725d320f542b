"""Run every installed adapter through the check machinery, one worker per implementation.

Each implementation and dtype gets its own sandbox worker (keras reads its backend once per
process; a library that crashes or hangs takes only its worker down). Battery cases that use a
feature the declaration rules out are ``unsupported`` (the subject sets them aside; an E != Ev
case goes as its zero-padded E == Ev twin), a run-time refusal is ``unsupported`` for its case
only, and detectors whose whole subject is such a feature are not run; all are recorded, never
scored. Each implementation is judged by the convention its adapter declares for a query with
no allowed key (``EMPTY_ROWS``: zero, or the uniform average a large negative fill gives), so a
documented convention is not counted as a defect.
"""

import os
import platform
import time

from attnzoo.diagnosis.cases import lighten, reproduce_smallest
from attnzoo.diagnosis.group import diagnose
from attnzoo.report import summarise
from attnzoo.runner import end_of_run, run
from attnzoo.sandbox.executor import DeadlineReached
from attnzoo.sandbox.isolated import Isolated
from attnzoo.sandbox.target import BadTarget, Target
from attnzoo.survey import adapters
from attnzoo.survey.capabilities import features, supported
from attnzoo.survey.warmup import PerShape
from detectors import all_detectors
from detectors.kit.battery import Battery
from detectors.kit.subject import Subject

# detectors that test one feature and nothing else: not run where it is declared unsupported
NEEDS = {"autograd": ("correct_gradients",), "dropout": ("dropout_is_inverted",)}
SCHEMA = "attnzoo.survey/1"


def select(only):
    """The (module, declaration) pairs to run; ``only`` names rows or module names."""
    chosen = adapters.declarations()
    if not only:
        return chosen
    known = {d.name for _, d in chosen} | {m for m, _ in chosen}
    unknown = [n for n in only if n not in known]
    if unknown:
        raise KeyError(unknown[0])
    return [(m, d) for m, d in chosen if d.name in only or m in only]


DEPTH = "standard"  # the default tier: where real kernels break, not the kill matrix's quick
BUDGET = 300.0  # seconds per implementation and dtype (--budget; 0 for none)


def survey(chosen, dtypes=None, seed=0, progress=print, depth=DEPTH, budget=BUDGET):
    """The survey document (a dict, see docs/survey.md) for the chosen adapters: each
    implementation and dtype checked at ``depth`` like ``check --budget``, the most telling
    units (a detector on the cases one tier adds) first, until ``budget`` seconds are spent
    (0: no limit)."""
    rows = []
    for module, decl in chosen:
        start = time.perf_counter()
        row = implementation(module, decl, dtypes, seed, depth, budget)
        row["seconds"] = round(time.perf_counter() - start, 1)
        progress(line(row))
        rows.append(row)
    return {
        "schema": SCHEMA,
        "seed": seed,
        "depth": depth,
        "budget": budget or None,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "implementations": rows,
    }


def implementation(module, decl, dtypes, seed, depth=DEPTH, budget=BUDGET):
    row = {
        "name": decl.name, "title": decl.title, "distribution": decl.distribution,
        "version": decl.version(), "adapter": f"attnzoo/survey/adapters/{module}.py",
        "locator": adapters.locator(module), "docs": decl.docs,
        "unsupported": sorted(decl.unsupported), "refuses": list(decl.refuses),
        "dtypes": list(decl.dtypes), "causal_alignment": decl.causal_alignment,
        "empty_rows": decl.empty_rows, "empty_rows_docs": decl.empty_rows_docs,
        "gqa_grouping_docs": decl.gqa_grouping_docs, "float64_docs": decl.float64_docs,
        "runs": [], "skipped": None,
    }
    if row["version"] is None:
        row["skipped"] = f"{decl.distribution} is not installed: {decl.install}"
        return row
    for dtype in [d for d in decl.dtypes if dtypes is None or d in dtypes]:
        try:
            row["runs"].append(run_one(module, decl, dtype, seed, depth, budget))
        except Skip as e:
            row["skipped"] = str(e)
            row["runs"] = []
            break
    return row


class Skip(Exception):
    """The implementation cannot be run at all here (it fails to import, say)."""


def run_one(module, decl, dtype, seed, depth=DEPTH, budget=BUDGET):
    import functools

    from attnzoo import budget as gate
    from attnzoo.progress import Progress

    battery = Battery(seed, depth=depth)  # cases outside the declaration: set aside by the subject
    set_aside = sorted(c.name for c in battery.attention if not supported(decl, c)
                       and features(c) & decl.unsupported != {"e_ne_ev"})
    skipped = {n for f in decl.unsupported for n in NEEDS.get(f, ())}
    chosen = [d for d in all_detectors() if d.NAME not in skipped]
    target = Target(decl.name, adapters.locator(module), "sdpa", "torch",
                    causal_alignment=decl.causal_alignment, empty_rows=decl.empty_rows,
                    unsupported=tuple(sorted(decl.unsupported)), refuses=tuple(decl.refuses))
    deadline = time.monotonic() + budget if budget else None
    executor = Isolated(call_seconds=decl.call_seconds, load_seconds=120, deadline=deadline)
    try:
        try:
            executor.use(target)
        except BadTarget as e:
            raise Skip(f"{decl.distribution} is installed but the adapter cannot load: {e}"
                       ) from None
        except DeadlineReached:
            raise Skip(f"loading took the whole budget of {budget:g} s") from None
        subject = Subject(target, executor, dtype, scoped=True)  # every call at this dtype
        warm = PerShape(executor, cap=budget or 0.0)  # compiles give their time back
        reach = subject.executor = gate.Reach(warm, subject)
        with open(os.devnull, "w") as quiet:
            findings, not_run, unreached, why = gate.run(
                chosen, subject, seed, depth, functools.partial(run, cases=True),
                Progress(quiet))
        if why is None:  # every unit ran: each worker's first answers, read at its end
            try:
                findings = end_of_run(chosen, subject, findings)
            except DeadlineReached:
                pass
        reached = gate.reached(findings, {d.NAME: d for d in chosen}, "sdpa", reach.seen)
    finally:
        executor.close()
    diagnosis = diagnose([f.to_json() for f in findings])
    reproduce_smallest(diagnosis, findings)
    lighten(findings)
    return {
        "dtype": dtype,
        "depth": depth,
        "summary": summarise(findings, not_run, unreached),
        "warmup": warm.report(),
        "diagnosis": diagnosis,
        "cases_set_aside": set_aside,
        "detectors_not_run": sorted(skipped),
        "not_run": not_run,
        "unreached": unreached,
        "reached": reached,
        "findings": [finding(f, decl) for f in findings],
    }


def finding(f, decl):
    data = f.to_json()
    data["refusal"] = bool(f.verdict == "crashed" and any(r in f.message for r in decl.refuses))
    return data


def line(row):
    """One summary line per implementation, as the command prints it."""
    head = f"{row['name']:<18} {row['version'] or '-':<12}"
    if row["skipped"]:
        return f"{head} skipped: {row['skipped']}"
    parts = []
    for r in row["runs"]:
        s = r["summary"]
        detail = ", ".join(f"{s[k]} {k}" for k in ("killed", "nan", "crashed", "hung") if s[k])
        causes = sum(1 for g in r.get("diagnosis", ()) if g["feature"])
        parts.append(f"{r['dtype']}: {s['flagged']} flagged" + (f" ({detail})" if detail else "")
                     + (f" from {causes} root cause{'s' if causes != 1 else ''}" if causes
                        else "") + f", {s['passed']} ok, {s['not_applicable']} n/a"
                     + (f", {s['errors']} DETECTOR ERRORS" if s.get("errors") else ""))
    return f"{head} " + "; ".join(parts)
