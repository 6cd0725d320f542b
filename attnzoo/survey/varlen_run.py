"""``attnzoo survey --contract varlen``: every varlen adapter through ``check --contract varlen``.

Each adapter and dtype is one :func:`attnzoo.varlen_check.run`: the kernel in a confined worker
of its own behind a relay, the fifteen detectors of ``detectors/varlen/`` here, the adapter's
declared conventions (causal alignment, empty rows, window counting) and what its API cannot
spell (``unsupported``) as that run's options, so that a documented convention is judged as the
library states it and never counted as a defect, and a missing feature sets cases aside.
Each run has a deadline; what it did not reach is recorded as not run. A flagged detector
carries the exact command that reproduces it and, when its case is one of the battery's as it
stands, a Python call of the adapter on that case.
"""

import os
import platform
import time

from attnzoo.survey import varlen_adapters

SCHEMA = "attnzoo.survey-varlen/1"
DEPTH = "standard"
DEADLINE = 900.0  # seconds per adapter and dtype (--budget; 0 for none)


def select(only):
    """The (module, declaration) pairs to run; ``only`` names rows, module names, or (tests)
    the path of a file that defines ``DECLARATION`` and ``attn_varlen``."""
    chosen = varlen_adapters.declarations()
    if not only:
        return chosen
    known = {d.name for _, d in chosen} | {m for m, _ in chosen}
    picked = []
    for name in only:
        if name.endswith(".py") and os.path.isfile(name):
            picked.append((name, file_declaration(name)))
        elif name not in known:
            raise KeyError(name)
    return [(m, d) for m, d in chosen if d.name in only or m in only] + picked


def file_declaration(path):
    """A fake library's declaration, read from its file (the worker imports it again)."""
    import runpy

    return runpy.run_path(path)["DECLARATION"]


def survey(chosen, dtypes=None, seed=0, progress=print, depth=DEPTH, deadline=DEADLINE):
    """The varlen survey document (a dict, see docs/survey-varlen.md)."""
    rows = []
    for module, decl in chosen:
        start = time.perf_counter()
        row = implementation(module, decl, dtypes, seed, depth, deadline)
        row["seconds"] = round(time.perf_counter() - start, 1)
        progress(line(row))
        rows.append(row)
    return {
        "schema": SCHEMA,
        "contract": "varlen",
        "seed": seed,
        "depth": depth,
        "deadline": deadline or None,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "implementations": rows,
    }


def implementation(module, decl, dtypes, seed, depth=DEPTH, deadline=DEADLINE):
    row = {
        "name": decl.name, "module": module, "title": decl.title, "distribution": decl.distribution,
        "version": decl.version(), "adapter": varlen_adapters.adapter_path(module),
        "locator": varlen_adapters.locator(module), "docs": decl.docs,
        "converts": decl.converts, "dtypes": list(decl.dtypes), "dtypes_docs": decl.dtypes_docs,
        "conventions": {what: {"value": getattr(decl, what), "docs": getattr(decl, f"{what}_docs")}
                        for what in ("causal_alignment", "empty_rows", "window_counting")},
        "unsupported": {"value": list(decl.unsupported), "docs": decl.unsupported_docs},
        "runs": [], "skipped": None,
    }
    if row["version"] is None:
        row["skipped"] = f"{decl.distribution} is not installed: {decl.install}"
        return row
    for dtype in [d for d in decl.dtypes if dtypes is None or d in dtypes]:
        try:
            row["runs"].append(run_one(module, decl, dtype, seed, depth, deadline))
        except Skip as e:
            row["skipped"], row["runs"] = str(e), []
            break
    return row


class Skip(Exception):
    """The adapter cannot be run at all here (its library fails to import, say)."""


def run_one(module, decl, dtype, seed, depth=DEPTH, deadline=DEADLINE):
    """One adapter at one dtype: ``check --contract varlen`` with its declared conventions."""
    from attnzoo import varlen_check
    from attnzoo.options import BadInput
    from attnzoo.progress import Progress

    options, chosen = varlen_check.options(
        dtype=dtype, depth=depth, seed=seed, causal_alignment=decl.causal_alignment,
        empty_rows=decl.empty_rows, window_counting=decl.window_counting,
        unsupported=decl.unsupported, timeout=decl.call_seconds, warmup=decl.call_seconds,
        deadline=deadline or 0)
    locator = varlen_adapters.locator(module)
    with open(os.devnull, "w") as quiet:
        try:
            document, _ = varlen_check.run(locator, options, chosen, name=decl.name,
                                           progress=Progress(quiet))
        except BadInput as e:
            raise Skip(f"{decl.distribution} is installed but the adapter cannot load: {e}"
                       ) from None
    impl = document["implementations"][0]
    findings = impl["findings"]
    for f in findings:
        if f["verdict"] not in ("survived", "n/a", "unsupported"):
            f["reproduce"] = reproduction(locator, decl, f, dtype, depth, seed)
    return {"dtype": dtype, "depth": depth, "summary": impl["summary"], "findings": findings,
            "not_run": impl["not_run"], "stopped": document["stopped"],
            "seconds": document["seconds"]}


def reproduction(locator, decl, finding, dtype, depth, seed):
    """The command that reruns the flagged detector alone, and a Python call of the adapter
    on the failing case when that case is one of the battery's unchanged."""
    from detectors.kit.varlen import battery

    command = (f"PYTHONPATH=. python -m attnzoo check {locator} --contract varlen --only "
               f"{finding['detector']} --dtype {dtype} --depth {depth} --seed {seed} "
               f"--causal-alignment {decl.causal_alignment} --empty-rows {decl.empty_rows} "
               f"--window-counting {decl.window_counting}"
               + (f" --unsupported {','.join(decl.unsupported)}" if decl.unsupported else ""))
    case = (finding.get("evidence") or {}).get("case")
    names = {c.name for c in battery(seed, depth)}
    python = None
    if case in names:
        module, _, fn = locator.rpartition(":")
        load = (f"import runpy\nattn_varlen = runpy.run_path({module!r})[{fn!r}]"
                if module.endswith(".py") else f"from {module} import {fn}")
        python = (f"import torch\n{load}\nfrom detectors.kit.varlen import battery, reference\n"
                  f"case = next(c for c in battery({seed}, {depth!r}) if c.name == {case!r})"
                  f".to(torch.{dtype})\n"
                  "out = attn_varlen(case.q, case.k, case.v, **case.args)\n"
                  "want, _ = reference(case, "
                  f"{decl.causal_alignment!r})  # the contract's answer\n"
                  "print((out.double() - want.double()).abs().max())")
    return {"command": command, "python": python}


def line(row):
    """One summary line per adapter, as the command prints it."""
    head = f"{row['name']:<18} {row['version'] or '-':<12}"
    if row["skipped"]:
        return f"{head} skipped: {row['skipped']}"
    parts = []
    for r in row["runs"]:
        s = r["summary"]
        detail = ", ".join(f"{s[k]} {k}" for k in ("killed", "nan", "crashed", "hung") if s[k])
        parts.append(f"{r['dtype']}: {s['flagged']} flagged" + (f" ({detail})" if detail else "")
                     + f", {s['passed']} ok, {s['not_applicable']} n/a"
                     + (f", {s['not_run']} not run" if s["not_run"] else "")
                     + (f", {s['errors']} DETECTOR ERRORS" if s["errors"] else ""))
    return f"{head} " + "; ".join(parts)
