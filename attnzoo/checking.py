"""``attnzoo check``: resolve a locator to implementations, run the detectors, build the report.

Every implementation runs in a worker process (``attnzoo.sandbox``); this module decides what
to run and returns the sections and the JSON document that ``attnzoo.report`` and the command
line print. Bad input raises ``BadInput`` with one line naming what is wrong and what to do.
"""

import gc
import os
import time

from attnzoo.catalogue import ROW_BACKENDS
from attnzoo.options import BadInput, check_device, check_seed  # noqa: F401 - imported from here


def choose_detectors(only):
    """Every detector of the suite, or those named (validated names: Options.only)."""
    from detectors import all_detectors, by_name

    if not only:
        return all_detectors()
    names = by_name()  # the baseline suites may be asked for by name too
    return [names[n] for n in only]


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


def targets(executor, locator, options, name=None):
    """The implementations a locator names, with the conventions the options declare; ``name``
    is what the report calls a target that is not a zoo file (the locator when None)."""
    from attnzoo.sandbox.target import Target

    declared = dict(mask_convention=options.mask_convention,
                    causal_alignment=options.causal_alignment, device=options.device,
                    unsupported=options.unsupported, refuses=options.refuses,
                    empty_rows=options.empty_rows)
    info = executor.describe(locator)
    if info["kind"] == "zoo":
        path = locator.split(":")[0]
        return [Target(f"{info['id']}/{b}", f"{path}:{attr}", *ROW_BACKENDS[b], **declared)
                for b, attr in info["implementations"].items()]
    backend = options.backend
    if info["kind"] == "lesson":
        backend = backend or executor.infer_backend(locator) or "numpy"
        return [Target(name or locator, locator, "lesson", backend, **declared)]
    if backend == "numpy":
        raise BadInput(f"{locator} is a callable: SDPA-style callables take torch tensors; "
                       "drop --backend numpy")
    return [Target(name or locator, locator, "sdpa", "torch", **declared)]


def _freeze():
    """Move what lives as long as the run (modules, the battery, the loaded target) out of the
    collector's sight, so that the calls' garbage does not make it rescan them each time. Not
    when the caller froze objects of its own: unfreezing would free them too. True when frozen
    here (the run unfreezes at its end)."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def run_check(locator, options, *, name=None, progress=None):
    """Run the chosen detectors on every implementation the locator names.

    ``options`` is an :class:`attnzoo.options.Options`, built (validated) by the caller.
    Returns (sections, detectors by name, the JSON document, the exit code); a section has
    target, findings, the detectors the deadline left unrun, and summary. A run cut short by
    the deadline with nothing flagged exits 4 (``report.INCOMPLETE``): a partial report is
    never "conformant", and it is no bad input either. With an
    expectations file, expected failures do not fail the run and an expected failure that did
    not happen does. A dtype given scopes every call of the run to it; without one the calls
    are float64 and detectors about dtypes try every dtype. With ``shrink``, each flagged
    attention case is also shrunk to the smallest case found that still fails
    (attnzoo.shrink). ``follow=False`` stops each detector at its first failure
    (``attnzoo.runner``) instead of recording every case's outcome: no diagnosis. With a
    ``budget`` the units run in the measured order (attnzoo.budget) and each section says what
    they reached; ``exitfirst`` ends the run at the first flagged detector.
    ``name`` and ``progress`` are for attnzoo.api: what the report calls a target that is not
    a zoo file, and a :class:`attnzoo.progress.Progress` on another stream than stderr.
    """
    import functools

    from attnzoo import budget
    from attnzoo.diagnosis.cases import lighten, reproduce_smallest, scripts
    from attnzoo.diagnosis.group import diagnose
    from attnzoo.diagnosis.known import resembling
    from attnzoo.progress import Progress
    from attnzoo.report import INCOMPLETE, SCHEMA, describe_target, exit_code, summarise
    from attnzoo.runner import end_of_run, run
    from attnzoo.sandbox import options as sandbox
    from attnzoo.sandbox import session
    from attnzoo.sandbox.executor import DeadlineReached
    from attnzoo.sandbox.target import BadTarget
    from attnzoo.shrink import Shared
    from detectors.kit.battery import Battery
    from detectors.kit.subject import Subject

    scoped, dtype = options.dtype is not None, options.dtype or "float64"
    chosen = choose_detectors(options.only)
    precheck(locator)
    expected = load_expectations(options.expect)
    battery = Battery(options.seed, depth=options.depth)
    follow = options.follow
    start = time.perf_counter()
    progress = Progress() if progress is None else progress
    executor = session.executor(options, progress)
    sections, not_run, halted = [], [], None  # halted: why the run stopped early
    frozen = False
    try:
        try:
            found = targets(executor, locator, options, name)
        except DeadlineReached:  # while importing it: nothing ran
            found, not_run = [], [(locator, d.NAME) for d in chosen]
            halted = session.DEADLINE
        sandbox.check_targets(found, dtype)
        for n, target in enumerate(found):
            if not not_run and halted is None:
                try:
                    executor.use(target)
                except DeadlineReached:
                    halted = session.DEADLINE
                else:
                    frozen = frozen or _freeze()
                    subject = Subject(target, executor, dtype, scoped=scoped)
                    subject.progress = progress
                    # one detector's finding; what their shrinks share (cases, time)
                    one = functools.partial(run, shrink=options.shrink, cases=follow,
                                            shared=Shared())
                    stop = (lambda f: f.caught) if options.exitfirst else None
                    unreached, reached = {}, None
                    if options.budget:
                        reach = subject.executor = budget.Reach(executor, subject)
                        per = len(chosen) * len(budget.tiers(options.depth))
                        findings, skipped, unreached, why = budget.run(
                            chosen, subject, options.seed, options.depth, one, progress, stop,
                            n * per, len(found) * per)
                        reached = budget.reached(findings, {d.NAME: d for d in chosen},
                                                 target.contract, reach.seen)
                    else:
                        findings, skipped, why = session.run_all(
                            chosen, subject, battery, one, progress, n * len(chosen),
                            len(found) * len(chosen), stop)
                    if why is None:  # every detector ran: the answers kept to the end, read
                        try:
                            findings = end_of_run(chosen, subject, findings)
                        except DeadlineReached:
                            pass  # the time ran out first: what the detectors found stands
                    diagnosis = diagnose([f.to_json() for f in findings]) if follow else []
                    resembles = resembling([f.to_json() for f in findings], target.contract,
                                           target.backend)
                    reproduce_smallest(diagnosis, findings)
                    written = scripts(diagnosis, findings, target) if options.repro_dir else []
                    lighten(findings)
                    not_run += [(target, name) for name in skipped]
                    halted = halted or why
                    sections.append({"target": describe_target(target, dtype, options.seed,
                                                                       executor.manifest),
                                     "findings": findings, "not_run": skipped,
                                     "summary": summarise(findings, skipped, unreached),
                                     "diagnosis": diagnosis, "resembles": resembles,
                                     "scripts": written, "stopped": why,
                                     "unreached": unreached, "reached": reached})
                    continue
            not_run += [(target, d.NAME) for d in chosen]
    except (BadTarget, sandbox.BadOption) as e:
        raise BadInput(str(e)) from None
    finally:
        if frozen:
            gc.unfreeze()
        progress.done()
        executor.close()
    if options.repro_dir is not None:  # run once the workers are gone: a fresh interpreter each
        from attnzoo import reproductions

        reproductions.write(sections, options)
    code = exit_code(sections)
    if expected is not None:
        from attnzoo import expectations

        lines, entries, unexpected = expectations.report(sections, expected, options.expect)
        expectations.annotate(sections, entries)
        code = 1 if unexpected else (3 if code == 3 else 0)
    if code == 0 and (not_run or any(s["unreached"] for s in sections)):
        code = INCOMPLETE
    document = {
        "schema": SCHEMA,
        "command": "check",
        "target": locator,
        "depth": options.depth,
        "deadline": options.deadline or None,
        "budget": options.budget,
        "stopped": halted,
        "isolation": session.isolation_json(options),
        "implementations": [
            {"target": s["target"], "summary": s["summary"], "diagnosis": s["diagnosis"],
             "resembles": s.get("resembles", []),
             "findings": [f.to_json() for f in s["findings"]], "not_run": s["not_run"],
             "stopped": s["stopped"],
             **({"reached": s["reached"], "unreached": s["unreached"]}
                if options.budget else {}),
             **({"reproductions": s["reproductions"]} if "reproductions" in s else {})}
            for s in sections
        ],
        "summary": summarise([f for s in sections for f in s["findings"]],
                             [name for _, name in not_run],
                             {f"{s['target']['name']} {tier}": names for s in sections
                              for tier, names in s["unreached"].items()}),
        "seconds": round(time.perf_counter() - start, 3),
        "exit_code": code,
    }
    if options.repro_dir is not None:
        document["repro_dir"] = os.path.abspath(options.repro_dir)
    if expected is not None:
        document["expectations"] = {"file": options.expect, "entries": entries,
                                    "lines": lines}
        total = document["summary"]
        total["expected_failures"] = sum(s["summary"]["expected_failures"] for s in sections)
        total["conformant"] = bool(sections) and all(s["summary"]["conformant"]
                                                     for s in sections)
    return sections, {d.NAME: d for d in chosen}, document, code
