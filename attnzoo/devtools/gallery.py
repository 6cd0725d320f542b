"""The gallery of generated kernels: docs/generated-kernels.json and the page made from it.

Every zoo entry of category ``generated`` is a plausible wrong kernel. For each, the JSON holds
(1) whether it passes a KernelBench-style check — ``torch.allclose(atol=rtol=1e-2)`` against
``F.scaled_dot_product_attention`` on five ``torch.rand`` trials of one float32 shape, no mask,
not causal, the trial seeds drawn from 42 as KernelBench's ``run_and_check_correctness`` draws
them — (2) which detectors flag it in ``attnzoo check --depth quick`` and (3) which flag it at
``--depth standard --budget 10`` (the most telling cases first). ``attnzoo docs`` measures it
(a full run) and writes the page from the JSON (also with ``--from-json``); ``attnzoo docs
--check`` names the page stale when it is not what the JSON gives, or the JSON's entries are not
the zoo's.
"""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JSON_PATH = Path("docs/generated-kernels.json")
PAGE = Path("docs/generated-kernels.md")
CATEGORY = "generated"
SHAPE = (2, 4, 512, 1024)  # KernelBench's level-1 SDPA problem is (32, 32, 512, 1024)
TRIALS, SEED, ATOL, RTOL = 5, 42, 1e-2, 1e-2
BUDGET = 10  # seconds: the --budget of the standard-depth check
COMMAND = "attnzoo docs"
SHOWN = 3  # detectors named per cell of the table


def entries():
    """The zoo's bug entries of the gallery's category, by id."""
    import zoo

    return sorted((e for e in zoo.BUGS if e.meta.category == CATEGORY), key=lambda e: e.id)


def trial_seeds():
    """KernelBench's: ``torch.manual_seed(42)`` then one ``randint(0, 10**7)`` per trial."""
    import torch

    torch.manual_seed(SEED)
    return [int(torch.randint(0, 10**7, (1,)).item()) for _ in range(TRIALS)]


def kernelbench(kernel):
    """The KernelBench-style verdict on ``kernel``: passes, the trials passed, max error."""
    import torch
    import torch.nn.functional as F

    passed, errors, why = 0, [], []
    for seed in trial_seeds():
        torch.manual_seed(seed)
        q, k, v = (torch.rand(SHAPE, dtype=torch.float32) for _ in range(3))
        with torch.no_grad():
            ref = F.scaled_dot_product_attention(q, k, v)  # the reference runs first
            try:
                out = kernel(q, k, v)
            except Exception as e:  # noqa: BLE001 - a kernel that raises fails the trial
                why.append(f"raised {type(e).__name__}")
                continue
        if tuple(out.shape) != tuple(ref.shape):
            why.append(f"shape {tuple(out.shape)}")
            continue
        errors.append((out.double() - ref.double()).abs().max().item())
        if torch.allclose(out, ref, atol=ATOL, rtol=RTOL):
            passed += 1
    worst = None if any(e != e for e in errors) else max(errors, default=None)  # None: NaN
    return {"passes": passed == TRIALS, "trials_passed": passed,
            "max_error": None if worst is None else float(f"{worst:.3g}"),
            "failures": sorted(set(why))}


def attnzoo_check(locator, **options):
    """Which detectors flag ``locator`` with these options: flagged, not run, seconds."""
    import time

    from attnzoo.checking import run_check
    from attnzoo.options import Options
    from attnzoo.progress import Progress
    from detectors.kit.verdict import CAUGHT

    with open("/dev/null", "w") as quiet:
        start = time.perf_counter()
        sections, _, document, code = run_check(locator, Options.build(**options),
                                                progress=Progress(quiet))
    findings = [f for s in sections for f in s["findings"]]
    return {"flagged": [f.detector for f in findings if f.verdict in CAUGHT],
            "not_run": sorted({n for s in sections for n in s["not_run"]}),
            "exit_code": code, "seconds": round(time.perf_counter() - start, 1)}


def measure(progress=None):
    """The gallery's document: every generated entry, measured now."""
    import importlib

    rows = []
    for e in entries():
        if progress:
            progress(e.id)
        kernel = importlib.import_module(e.module).SDPA
        rows.append({"id": e.id, "title": e.meta.title, "depth": e.meta.depth,
                     "kernelbench": kernelbench(kernel),
                     "quick": attnzoo_check(e.locator("sdpa"), depth="quick"),
                     "budget": attnzoo_check(e.locator("sdpa"), depth="standard",
                                             budget=BUDGET)})
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or None
    return {"commit": commit, "shape": list(SHAPE), "dtype": "float32", "trials": TRIALS,
            "seed": SEED, "atol": ATOL, "rtol": RTOL, "budget_seconds": BUDGET,
            "entries": rows}


def named(detectors):
    if not detectors:
        return "no"
    more = len(detectors) - SHOWN
    return ", ".join(f"`{d}`" for d in detectors[:SHOWN]) + (f" (+{more})" if more > 0 else "")


def page(doc):
    n, passing = len(doc["entries"]), sum(r["kernelbench"]["passes"] for r in doc["entries"])
    shape = "(" + ", ".join(str(s) for s in doc["shape"]) + ")"
    lines = [
        f"<!-- generated by `{COMMAND}` from {JSON_PATH.as_posix()}: edit "
        "attnzoo/devtools/gallery.py, then run `attnzoo docs` -->",
        "# Generated kernels: what a weak check accepts",
        "",
        f"The zoo's *{CATEGORY}* entries are plausible wrong attention kernels, each with one "
        "mistake of the kind reported for machine-generated kernels. Each row asks three "
        "questions of one entry:",
        "",
        f"- **KernelBench-style check**: does it pass `torch.allclose(out, ref, atol="
        f"{doc['atol']:g}, rtol={doc['rtol']:g})` against "
        f"`torch.nn.functional.scaled_dot_product_attention` on {doc['trials']} trials of "
        f"`torch.rand` inputs, {doc['dtype']}, shape {shape} (KernelBench's SDPA problem is "
        f"(32, 32, 512, 1024); the batch and heads are cut to fit a small machine), no mask, "
        f"not causal, the trial seeds drawn from {doc['seed']} as KernelBench draws them? "
        "The largest error over the trials is given.",
        "- **attnzoo at quick**: the detectors that flag it in `attnzoo check zoo/<file>.py "
        "--depth quick` (the first few named).",
        f"- **attnzoo at {doc['budget_seconds']:g} s**: the same at `--depth standard "
        f"--budget {doc['budget_seconds']:g}` (the most telling units of one detector and one "
        "tier first, quick and standard, in the order measured from the kill matrix).",
        "",
        f"{passing} of the {n} pass the KernelBench-style check. The data is "
        f"[`{JSON_PATH.name}`]({JSON_PATH.name}); `{COMMAND}` measures it again and rewrites "
        f"this page (`{COMMAND} --from-json docs/kill-matrix.json` writes it from the JSON "
        "without measuring).",
        "",
        "| entry | what it does | passes KernelBench-style (max error) | flagged at quick | "
        f"flagged at {doc['budget_seconds']:g} s |",
        "|---|---|---|---|---|",
    ]
    for r in doc["entries"]:
        kb = r["kernelbench"]
        err = "NaN" if kb["max_error"] is None else f"{kb['max_error']:.2g}"
        if kb["failures"]:
            err = ", ".join(kb["failures"])
        verdict = "yes" if kb["passes"] else f"no, {kb['trials_passed']}/{doc['trials']}"
        lines.append(f"| [`{r['id']}`](catalogue/{r['id']}.md) | {r['title']} | {verdict} "
                     f"({err}) | {named(r['quick']['flagged'])} | "
                     f"{named(r['budget']['flagged'])} |")
    lines.append("")
    return "\n".join(lines)


def load(root=ROOT):
    with open(Path(root) / JSON_PATH, encoding="utf-8") as f:
        return json.load(f)


def write(doc=None, root=ROOT):
    """Write the JSON (when given) and the page from the JSON; the paths written."""
    written = []
    if doc is not None:
        (Path(root) / JSON_PATH).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        written.append(JSON_PATH.as_posix())
    want = page(load(root))
    path = Path(root) / PAGE
    if not path.exists() or path.read_text(encoding="utf-8") != want:
        path.write_text(want, encoding="utf-8")
        written.append(PAGE.as_posix())
    return written


def stale(root=ROOT):
    """[(path, why)] when the page or the JSON's entry set is not what it should be."""
    try:
        doc = load(root)
        want = page(doc)
    except (OSError, ValueError, KeyError) as e:
        return [(PAGE.as_posix(), f"cannot render: {e!r}")]
    out = []
    have_ids, zoo_ids = {r["id"] for r in doc["entries"]}, {e.id for e in entries()}
    if have_ids != zoo_ids:
        out.append((JSON_PATH.as_posix(), f"entries differ from the zoo's {CATEGORY} entries "
                    f"(missing {sorted(zoo_ids - have_ids)}, extra {sorted(have_ids - zoo_ids)})"))
    path = Path(root) / PAGE
    if not path.exists():
        out.append((PAGE.as_posix(), "missing"))
    elif path.read_text(encoding="utf-8") != want:
        out.append((PAGE.as_posix(), f"differs from what {JSON_PATH.name} gives"))
    return out
