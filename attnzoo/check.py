"""``attnzoo check``: resolve a locator to implementations, run the detectors, build the report.

Every implementation runs in a worker process (``attnzoo.sandbox``); this module decides what
to run and returns the sections and the JSON document that ``attnzoo.report`` and the command
line print. Bad input raises ``BadInput`` with one line naming what is wrong and what to do.
"""

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
    """Refuse a device torch does not know, one this machine lacks, or one that holds no data."""
    from attnzoo.sandbox import options

    try:
        options.check_device(device)
    except options.BadOption as e:
        raise BadInput(str(e)) from None


def check_seed(seed):
    if seed < 0:
        raise BadInput(f"--seed must be 0 or more, not {seed}")


def precheck(locator):
    """Catch what needs no import: an empty string, a missing file, a malformed locator."""
    from attnzoo.sandbox.target import BadTarget, _split, check_file, is_file

    try:
        path, _, _ = _split(locator)
        if is_file(path):
            check_file(path)
    except BadTarget as e:
        raise BadInput(str(e)) from None


def load_expectations(path):
    """The expectations file's entries, or None when no file is given; a bad file is BadInput."""
    if path is None:
        return None
    from attnzoo import expectations
    from detectors import by_name

    try:
        return expectations.load(path, by_name())
    except expectations.ExpectationsError as e:
        raise BadInput(str(e)) from None


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
              device="cpu", dtype=None, seed=0, timeout=None, import_timeout=30.0,
              warmup=None, deadline=None, only=None, expect=None, depth="standard",
              unsupported="", refuses=(), shrink=True, follow=True):
    """Run the chosen detectors on every implementation the locator names.

    Returns (sections, detectors by name, the JSON document, the exit code); a section has
    target, findings, the detectors the deadline left unrun, and summary. A run cut short by
    ``deadline`` with nothing flagged exits 2: a partial report is never "conformant". With
    ``expect`` (an expectations file), expected failures do not fail the run and an expected
    failure that did not happen does. A ``dtype`` given scopes every call of the run to it;
    without one the calls are float64 and detectors about dtypes try every dtype. With
    ``shrink``, each flagged attention case is also shrunk to the smallest case found that
    still fails (attnzoo.shrink). ``follow=False`` stops each detector at its first failure
    (``attnzoo.runner``) instead of recording every case's outcome: no diagnosis.
    """
    import functools
    from types import SimpleNamespace

    from attnzoo.diagnosis.cases import lighten
    from attnzoo.diagnosis.group import diagnose
    from attnzoo.report import SCHEMA, describe_target, exit_code, summarise
    from attnzoo.runner import run
    from attnzoo.sandbox import options, session
    from attnzoo.sandbox.executor import DeadlineReached
    from attnzoo.sandbox.target import BadTarget
    from detectors.kit.battery import Battery
    from detectors.kit.subject import Subject

    scoped, dtype = dtype is not None, dtype or "float64"
    chosen = choose_detectors(only)
    check_seed(seed)
    opts = SimpleNamespace(timeout=timeout, import_timeout=import_timeout, warmup=warmup,
                           deadline=deadline, device=device)
    try:
        options.validate(opts)
    except options.BadOption as e:
        raise BadInput(str(e)) from None
    precheck(locator)
    from detectors.kit.capabilities import VOCABULARY, parse

    if unsupported.strip() == "help":
        raise BadInput("--unsupported takes a comma-separated list of: "
                       + "; ".join(f"{k} ({v})" for k, v in VOCABULARY.items()))
    try:
        declared = parse(unsupported)
    except ValueError as e:
        raise BadInput(f"--unsupported: {e}") from None
    expected = load_expectations(expect)
    battery = Battery(seed, depth=depth)
    start = time.perf_counter()
    progress = session.Progress()
    executor = session.executor(opts, progress)
    sections, not_run = [], []
    try:
        found = targets(executor, locator, backend, mask_convention=mask_convention,
                        causal_alignment=causal_alignment, device=device,
                        unsupported=declared, refuses=tuple(refuses))
        options.check_targets(found, dtype)
        for n, target in enumerate(found):
            if not not_run:
                try:
                    executor.use(target)
                except DeadlineReached:
                    pass
                else:
                    subject = Subject(target, executor, dtype, scoped=scoped)
                    subject.progress = progress
                    findings, skipped = session.run_all(chosen, subject, battery,
                                                        functools.partial(run, shrink=shrink,
                                                                          cases=follow),
                                                        progress,
                                                        n * len(chosen), len(found) * len(chosen))
                    diagnosis = diagnose([f.to_json() for f in findings]) if follow else []
                    lighten(findings)
                    not_run += [(target, name) for name in skipped]
                    sections.append({"target": describe_target(target, dtype, seed,
                                                                       executor.manifest),
                                     "findings": findings, "not_run": skipped,
                                     "summary": summarise(findings, skipped),
                                     "diagnosis": diagnosis})
                    continue
            not_run += [(target, d.NAME) for d in chosen]
    except DeadlineReached:
        raise BadInput(f"the --deadline of {deadline:g} s passed while loading {locator}: "
                       "raise --deadline or --import-timeout") from None
    except (BadTarget, options.BadOption) as e:
        raise BadInput(str(e)) from None
    finally:
        progress.done()
        executor.close()
    code = exit_code(sections)
    if expected is not None:
        from attnzoo import expectations

        lines, entries, unexpected = expectations.report(sections, expected, expect)
        code = 1 if unexpected else (3 if code == 3 else 0)
    if not_run and code == 0:
        code = 2
    document = {
        "schema": SCHEMA,
        "command": "check",
        "target": locator,
        "depth": depth,
        "implementations": [
            {"target": s["target"], "summary": s["summary"], "diagnosis": s["diagnosis"],
             "findings": [f.to_json() for f in s["findings"]], "not_run": s["not_run"]}
            for s in sections
        ],
        "summary": summarise([f for s in sections for f in s["findings"]],
                             [name for _, name in not_run]),
        "seconds": round(time.perf_counter() - start, 3),
        "exit_code": code,
    }
    if expected is not None:
        document["expectations"] = {"file": expect, "entries": entries, "lines": lines}
    return sections, {d.NAME: d for d in chosen}, document, code
