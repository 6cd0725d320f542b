"""The detectors inside anyone's pytest: ``pytest --attnzoo-target mypkg.attn:sdpa``.

Installed through the ``pytest11`` entry point ``attnzoo``. Without ``--attnzoo-target`` it adds
its options and does nothing else: no item, no fixture, no hook that changes a run. With it,
each target gets one item per detector, ``causality[mypkg.attn:sdpa]``, run exactly as
``attnzoo check`` runs it (the target in a worker process with a time limit per call), and a
failure carries the same evidence and reproduction. ``--attnzoo-expect FILE`` reads known
failures (:mod:`attnzoo.expectations`): xfail with the reason, strict. A detector the target
cannot run (n/a, or every case outside what it supports) is skipped, never passed; a failure
carries the root causes of that detector's failing cases, and the run ends with the diagnosis
``attnzoo check`` opens with, over every detector of each target. The worker is isolated
as ``attnzoo check``'s is (``--attnzoo-isolation``, ``--attnzoo-memory-limit``,
``--attnzoo-scratch-limit``); the run's header says how. Items are plain pytest
items, so ``-k``, JUnit XML and pytest-xdist work on them; each xdist worker has its own worker
process for the target. With ``--attnzoo-contract varlen`` the items are the varlen detectors
(docs/varlen.md), run as ``attnzoo check --contract varlen`` runs them, with its declarations
(``--attnzoo-empty-rows``, ``--attnzoo-window-counting``, ``--attnzoo-unsupported``): the kernel in
a confined worker, each call time-limited, a hang or a crash a failure of the item that met it. The
project's own kill-matrix plugin (``attnzoo.matrix.plugin``) is a
separate plugin loaded with ``-p`` and shares nothing with this one.
"""

import os
import re
import signal

import pytest

from attnzoo import options
from attnzoo.options import BadInput, Options

ENDING = (signal.SIGTERM, signal.SIGHUP)  # pytest's own SIGINT handling is left alone
# the fields of attnzoo.options.Options the plugin takes, each as --attnzoo-<name with dashes>
SHARED = ("backend", "depth", "dtype", "device", "mask_convention", "causal_alignment",
          "empty_rows", "window_counting", "unsupported", "refuses", "seed", "timeout", "only",
          "expect", "isolation", "memory_limit", "scratch_limit")


def pytest_addoption(parser):
    # no choices for the dtype and the depth: Options.build checks them, so that this module,
    # loaded in every pytest run, imports nothing of the project until it has a target
    h = options.HELP
    g = parser.getgroup("attnzoo", "attention conformance (attnzoo): the detectors as tests")
    g.addoption("--attnzoo-target", action="append", default=[], metavar="LOCATOR",
                help="attention to check: path/to/module.py, file.py:func or package.module:func "
                "(repeatable); nothing is collected without it")
    g.addoption("--attnzoo-contract", choices=("varlen",), default=None,
                help="varlen: run the varlen detectors (flash-attention's attn_varlen "
                "signature, docs/varlen.md) on each target instead of the SDPA ones")
    g.addoption("--attnzoo-backend", choices=options.BACKENDS, default=None, help=h["backend"])
    g.addoption("--attnzoo-depth", default=Options.depth, metavar="DEPTH",
                help=h["depth"].format(default=Options.depth))
    g.addoption("--attnzoo-dtype", default=None, metavar="DTYPE",
                help=h["dtype"])
    g.addoption("--attnzoo-device", default=Options.device, help=h["device"])
    g.addoption("--attnzoo-mask-convention", choices=options.MASK_CONVENTIONS,
                default=Options.mask_convention, help=h["mask_convention"])
    g.addoption("--attnzoo-causal-alignment", choices=options.CAUSAL_ALIGNMENTS,
                default=None, help=h["causal_alignment"])
    g.addoption("--attnzoo-empty-rows", choices=options.ANY_EMPTY_ROWS,
                default=Options.empty_rows, help=h["empty_rows"])
    g.addoption("--attnzoo-window-counting", choices=tuple(options.WINDOW_COUNTINGS),
                default=None, help=h["window_counting"])
    g.addoption("--attnzoo-unsupported", default="", metavar="CAPABILITIES",
                help=h["unsupported"])
    g.addoption("--attnzoo-refuses", action="append", default=[], metavar="MESSAGE",
                help=h["refuses"])
    g.addoption("--attnzoo-seed", type=int, default=Options.seed, help=h["seed"])
    # given, so that the first call of each function gets it too: the plugin has no --warmup
    g.addoption("--attnzoo-timeout", type=float, default=options.CALL_SECONDS,
                metavar="SECONDS", help=h["timeout"])
    g.addoption("--attnzoo-only", action="append", default=[], metavar="DETECTOR",
                help=h["only"])
    g.addoption("--attnzoo-expect", metavar="FILE", default=None,
                help="expectations file (TOML) of known failures: xfail, strict")
    g.addoption("--attnzoo-isolation", choices=options.ISOLATIONS, default=None,
                help=h["isolation"])
    g.addoption("--attnzoo-memory-limit", metavar="SIZE", default=None, help=h["memory_limit"])
    g.addoption("--attnzoo-scratch-limit", metavar="SIZE", default=None,
                help=h["scratch_limit"])


def pytest_configure(config):
    if not config.getoption("attnzoo_target"):
        return
    config.pluginmanager.register(Conformance(config), "attnzoo-conformance")


def respell(message):
    """A message naming ``attnzoo check``'s options, with the plugin's names for them."""
    ours = {name.replace("_", "-") for name in SHARED + ("contract",)}
    return re.sub(r"--([a-z][a-z-]*)",
                  lambda m: f"--attnzoo-{m[1]}" if m[1] in ours else m[0], message)


class Conformance:
    """The items of every target, and the worker process they share in this pytest process."""

    def __init__(self, config):
        from attnzoo import expectations
        from attnzoo.checking import choose_detectors
        from detectors import by_name

        self.config = config
        self.executor = None
        self.found = {}  # target locator -> its findings in their JSON form, in this process
        self.contract = config.getoption("attnzoo_contract")
        if self.contract == "varlen":
            self._varlen(config)
            return
        try:
            self.options = Options.build(**{n: config.getoption(f"attnzoo_{n}")
                                            for n in SHARED})
        except BadInput as e:
            raise pytest.UsageError(respell(str(e))) from None
        self.detectors = choose_detectors(self.options.only)
        self.expect_path = self.options.expect
        try:
            self.expected = (expectations.load(self.expect_path, by_name())
                             if self.expect_path else {})
        except expectations.ExpectationsError as e:
            raise pytest.UsageError(str(e)) from None
        self.battery = None

    def _varlen(self, config):
        from attnzoo import varlen_check

        try:
            self.options, self.detectors = varlen_check.options(
                **{n: config.getoption(f"attnzoo_{n}") for n in SHARED})
        except BadInput as e:
            raise pytest.UsageError(respell(str(e))) from None
        self.expect_path, self.expected = None, {}
        self.workers = {}  # locator -> its kernel's worker (varlen_check.Worker)

    def worker(self, locator):
        """The varlen kernel's worker, started anew after one hung or died."""
        from attnzoo import varlen_check

        if self.workers.get(locator) is None:
            if not hasattr(self, "ending"):
                self.ending = {sig: signal.signal(sig, self._ended) for sig in ENDING
                               if signal.getsignal(sig) is signal.SIG_DFL}
            self.workers[locator] = varlen_check.start(locator, self.options, None)
        return self.workers[locator]

    def check_varlen(self, detector, locator):
        from attnzoo import varlen_check

        worker = self.worker(locator)
        options = varlen_check.declared_by(self.options, worker)  # and what its module declares
        finding = varlen_check.one(detector, worker, options, locator)
        if finding.lost:
            worker.close()
            self.workers[locator] = None
        return finding

    def pytest_report_header(self, config):
        from attnzoo.sandbox.session import isolation_words

        return f"attnzoo: {isolation_words(self.options)}"

    def start(self):
        if self.executor is None:
            from attnzoo.sandbox.isolated import Isolated
            from attnzoo.sandbox.session import isolation
            from detectors.kit.battery import Battery

            o = self.options
            self.ending = {sig: signal.signal(sig, self._ended) for sig in ENDING
                           if signal.getsignal(sig) is signal.SIG_DFL}
            self.executor = Isolated(call_seconds=o.timeout, load_seconds=o.import_timeout,
                                     warmup_seconds=o.warmup, isolation=isolation(o))
            self.battery = Battery(o.seed, depth=o.depth)
        return self.executor

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        from attnzoo.sandbox.target import BadTarget

        if self.contract == "varlen":
            locators = list(dict.fromkeys(config.getoption("attnzoo_target")))
            for loc in locators:
                try:
                    self.worker(loc)  # its signature is read now: a bad target is a usage error
                except BadInput as e:
                    raise pytest.UsageError(f"--attnzoo-target: {e}") from None
            ours = [VarlenItem.from_parent(session, name=f"{d.NAME}[{loc}]",
                                           nodeid=f"varlen/{d.NAME}[{loc}]", detector=d,
                                           locator=loc, owner=self)
                    for loc in locators for d in self.detectors]
            items.extend(ours)
            config.hook.pytest_collectreport(
                report=pytest.CollectReport("attnzoo", "passed", None, ours))
            return

        try:
            targets = [t for loc in config.getoption("attnzoo_target")
                       for t in resolve(self.start(), loc, self.options)]
            for t in targets:  # its signature is read now: a bad one is a usage error, once
                self.executor.use(t)
        except BadTarget as e:
            raise pytest.UsageError(f"--attnzoo-target: {respell(str(e))}") from None
        ours = [DetectorItem.from_parent(session, name=f"{d.NAME}[{t.locator}]",
                                         nodeid=f"{d.NAME}[{t.locator}]", detector=d, target=t,
                                         owner=self)
                for t in targets for d in self.detectors]
        items.extend(ours)
        # reported as a collector's result, so that the header counts them ("collected 34
        # items"), as it counts the items of any test file
        config.hook.pytest_collectreport(
            report=pytest.CollectReport("attnzoo", "passed", None, ours))

    def pytest_terminal_summary(self, terminalreporter):
        """Each flagged target's diagnosis, over the detectors that ran in this process (all
        of them without xdist), as ``attnzoo check`` prints it first."""
        from attnzoo.diagnosis.group import diagnose
        from attnzoo.diagnosis.known import resembling
        from attnzoo.report import diagnosis_lines

        for target, findings in self.found.items():
            groups = diagnose(list(findings.values()))
            if not groups:
                continue
            terminalreporter.section(f"attnzoo diagnosis: {target.locator}")
            resembles = resembling(list(findings.values()), target.contract, target.backend)
            lines = diagnosis_lines(groups, resembles=resembles)[:-1]  # not "detectors:"
            lines[0] = lines[0].replace("per-detector detail below", "each failure above")
            for line in lines:
                terminalreporter.line(line)

    def pytest_unconfigure(self, config):
        if self.executor is not None:
            self.executor.close()
        for worker in getattr(self, "workers", {}).values():
            if worker is not None:
                worker.close()
        for sig, handler in getattr(self, "ending", {}).items():
            signal.signal(sig, handler)

    def _ended(self, signum, frame):
        """SIGTERM or SIGHUP ends pytest at once: the worker and all it started go first (its
        orphans included: it is their subreaper), then pytest dies of the signal as it would
        have."""
        from attnzoo.sandbox import hygiene

        hygiene.kill_all()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def check(self, detector, target):
        from attnzoo.diagnosis.cases import lighten, reproduce_smallest
        from attnzoo.diagnosis.group import diagnose
        from attnzoo.runner import run
        from detectors.kit.subject import Subject

        executor = self.start()
        if executor.target != target:
            executor.use(target)
        dtype = self.options.dtype  # given: it scopes every call
        subject = Subject(target, executor, dtype or "float64", scoped=dtype is not None)
        finding = run(detector, subject, self.battery, shrink=self.options.shrink,
                      cases=self.options.follow)
        own = diagnose([finding.to_json()]) if finding.caught else []
        reproduce_smallest(own, [finding])
        lighten([finding])
        self.found.setdefault(target, {})[detector.NAME] = finding.to_json()
        return finding, own


def resolve(executor, locator, options):
    """The implementations a locator names, with the conventions the options declare."""
    from attnzoo.checking import targets
    from attnzoo.sandbox.target import BadTarget

    try:
        return targets(executor, locator, options)
    except BadInput as e:
        raise BadTarget(respell(str(e))) from None


class ConformanceFailure(Exception):
    """A detector flagged the target; the text is what ``attnzoo check`` prints for it."""


class DetectorItem(pytest.Item):
    def __init__(self, *, detector, target, owner, **kwargs):
        super().__init__(**kwargs)
        self.detector, self.target, self.owner = detector, target, owner
        self.user_properties.append(("attnzoo_detector", detector.NAME))

    def runtest(self):
        from attnzoo import expectations
        from detectors.kit.verdict import ERROR, NA, UNSUPPORTED

        finding, groups = self.owner.check(self.detector, self.target)
        self.user_properties.append(("attnzoo_verdict", str(finding.verdict)))  # plain, for xdist
        expected = self.owner.expected.get(self.detector.NAME)
        outcome = expectations.judge(finding, expected)
        if finding.verdict in (NA, UNSUPPORTED):
            pytest.skip(finding.message)
        if finding.verdict == ERROR:
            raise ConformanceFailure(describe(finding) + "\n(a bug in attnzoo, not a verdict "
                                     "on the target)")
        if outcome == "xfail":
            pytest.xfail(expected.describe())
        if outcome == "xpass":
            raise ConformanceFailure(
                f"[{self.detector.NAME}] held on every case, but {self.owner.expect_path} "
                f"expects it to fail ({expected.describe()}): remove the entry")
        if finding.caught:
            raise ConformanceFailure(describe(finding, groups))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


class VarlenItem(pytest.Item):
    """One varlen detector on one kernel: passes, fails with the check's message, or is
    skipped where the kernel gave it nothing to judge (n/a, or unsupported as declared)."""

    def __init__(self, *, detector, locator, owner, **kwargs):
        super().__init__(**kwargs)
        self.detector, self.locator, self.owner = detector, locator, owner
        self.user_properties.append(("attnzoo_detector", detector.NAME))

    def runtest(self):
        from detectors.kit.verdict import ERROR, NA, UNSUPPORTED

        finding = self.owner.check_varlen(self.detector, self.locator)
        self.user_properties.append(("attnzoo_verdict", str(finding.verdict)))
        if finding.verdict in (NA, UNSUPPORTED):  # judged on nothing: never a pass
            pytest.skip(finding.message)
        if finding.verdict == ERROR:
            raise ConformanceFailure(f"[{self.detector.NAME}] {finding.message}")
        if finding.caught:
            raise ConformanceFailure(f"[{self.detector.NAME}] {finding.verdict}: "
                                     f"{finding.message}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


def describe(finding, groups=()):
    """The finding as ``attnzoo check`` prints it: the root causes of its failing cases
    (``groups``, from :func:`attnzoo.diagnosis.group.diagnose`), message, reproduction,
    notes."""
    from attnzoo.report import shrunk_lines

    lines, evidence = [finding.message], finding.evidence  # its first line: the short summary's
    if groups:
        lines.append("what its failing cases share:")
        lines += [f"  {i}. {g['sentence']}" for i, g in enumerate(groups, 1)]
    shrunk = evidence.shrunk if evidence is not None else None
    lines += [line.strip() for line in shrunk_lines(shrunk)]
    snippet = (shrunk or {}).get("snippet") or (evidence.snippet if evidence else "")
    if snippet:
        lines.append("reproduce:" + (" (the smallest case)" if shrunk and shrunk.get("snippet")
                                     else ""))
        lines += ["  " + s for s in snippet.splitlines()]
    lines += [f"note: {n}" for n in finding.notes]
    return "\n".join(lines)
