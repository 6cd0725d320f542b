"""``attnzoo check``: resolve a locator to implementations, run the detectors, build the report.

Every implementation runs in a worker process (``attnzoo.sandbox``); this module decides what
to run and returns the sections and the JSON document that ``attnzoo.report`` and the command
line print. Bad input raises ``BadInput`` with one line naming what is wrong and what to do.
"""

import math
import os
import time

from attnzoo.catalogue import ROW_BACKENDS


class BadInput(Exception):
    """One line: what is wrong and what to do."""


def choose_detectors(only):
    """Every detector of the suite, or those named (each once, in the order given)."""
    from detectors import all_detectors, by_name

    if not only:
        return all_detectors()
    names = by_name()  # the baseline suites may be asked for by name too
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(f"unknown detector {unknown[0]!r}: see 'attnzoo detectors'")
    return [names[n] for n in dict.fromkeys(only)]


def check_device(device):
    """Refuse a device torch does not know, or a GPU this machine does not have."""
    if device == "cpu":
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise BadInput(f"unknown --device {device!r}: use cpu, cuda or cuda:N") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise BadInput(f"--device {device}: no CUDA device on this machine; use --device cpu")


def check_seed(seed):
    if seed < 0:
        raise BadInput(f"--seed must be 0 or more, not {seed}")


def precheck(locator):
    """Catch what needs no import: an empty string, a missing file, a malformed locator."""
    from attnzoo.sandbox.target import BadTarget, _split

    try:
        path, _, _ = _split(locator)
    except BadTarget as e:
        raise BadInput(str(e)) from None
    looks_like_file = path.endswith(".py") or os.sep in path
    if looks_like_file and not os.path.exists(path):
        raise BadInput(f"no such file: {path}: check the path")
    if looks_like_file and not path.endswith(".py"):
        raise BadInput(f"{path} is not a .py file: point at a Python module")


def targets(executor, locator, backend, **declared):
    """The implementations a locator names, with the conventions the user declared."""
    from attnzoo.sandbox.target import Target

    info = executor.describe(locator)
    if info["kind"] == "zoo":
        path = locator.split(":")[0]
        return [Target(f"{info['id']}/{b}", f"{path}:{attr}", *ROW_BACKENDS[b], **declared)
                for b, attr in info["implementations"].items()]
    if info["kind"] == "lesson":
        backend = backend or executor.infer_backend(locator) or "numpy"
        return [Target(locator, locator, "lesson", backend, **declared)]
    if backend == "numpy":
        raise BadInput(f"{locator} is a callable: SDPA-style callables take torch tensors; "
                       "drop --backend numpy")
    return [Target(locator, locator, "sdpa", "torch", **declared)]


def run_check(locator, *, backend=None, mask_convention="keep", causal_alignment="top-left",
              device="cpu", dtype="float64", seed=0, timeout=10.0, only=None):
    """Run the chosen detectors on every implementation the locator names.

    Returns (sections, detectors by name, the JSON document, the exit code); a section has
    target, findings and summary.
    """
    from attnzoo.report import SCHEMA, describe_target, exit_code, summarise
    from attnzoo.runner import run
    from attnzoo.sandbox.executor import Isolated
    from attnzoo.sandbox.target import BadTarget
    from detectors.kit.battery import Battery
    from detectors.kit.subject import Subject

    chosen = choose_detectors(only)
    if not math.isfinite(timeout) or timeout <= 0:
        raise BadInput(f"--timeout must be a positive number of seconds, not {timeout}")
    check_seed(seed)
    check_device(device)
    precheck(locator)
    battery = Battery(seed)
    start = time.perf_counter()
    executor = Isolated(call_seconds=timeout)
    sections = []
    try:
        for target in targets(executor, locator, backend, mask_convention=mask_convention,
                              causal_alignment=causal_alignment, device=device):
            executor.use(target)
            subject = Subject(target, executor, dtype)
            findings = [run(d, subject, battery) for d in chosen]
            sections.append({"target": describe_target(target, dtype, seed),
                             "findings": findings, "summary": summarise(findings)})
    except BadTarget as e:
        raise BadInput(str(e)) from None
    finally:
        executor.close()
    code = exit_code(sections)
    document = {
        "schema": SCHEMA,
        "command": "check",
        "target": locator,
        "implementations": [
            {"target": s["target"], "summary": s["summary"],
             "findings": [f.to_json() for f in s["findings"]]}
            for s in sections
        ],
        "summary": summarise([f for s in sections for f in s["findings"]]),
        "seconds": round(time.perf_counter() - start, 3),
        "exit_code": code,
    }
    return sections, {d.NAME: d for d in chosen}, document, code
