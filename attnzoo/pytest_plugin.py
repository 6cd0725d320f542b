"""The detectors inside anyone's pytest: ``pytest --attnzoo-target mypkg.attn:sdpa``.

Installed through the ``pytest11`` entry point ``attnzoo``. Without ``--attnzoo-target`` it adds
its options and does nothing else: no item, no fixture, no hook that changes a run. With it,
each target gets one item per detector, ``causality[mypkg.attn:sdpa]``, run exactly as
``attnzoo check`` runs it (the target in a worker process with a time limit per call), and a
failure carries the same evidence and reproduction. ``--attnzoo-expect FILE`` reads known
failures (:mod:`attnzoo.expectations`): xfail with the reason, strict. Items are plain pytest
items, so ``-k``, JUnit XML and pytest-xdist work on them; each xdist worker has its own worker
process for the target. The project's own kill-matrix plugin (``attnzoo.matrix.plugin``) is a
separate plugin loaded with ``-p`` and shares nothing with this one.
"""

import pytest

DEPTHS = ("quick", "standard", "deep")  # the battery's tiers, as for `attnzoo check --depth`
DTYPES = ("float64", "float32", "float16", "bfloat16")


def pytest_addoption(parser):
    g = parser.getgroup("attnzoo", "attention conformance (attnzoo): the detectors as tests")
    g.addoption("--attnzoo-target", action="append", default=[], metavar="LOCATOR",
                help="attention to check: path/to/module.py, file.py:func or package.module:func "
                "(repeatable); nothing is collected without it")
    g.addoption("--attnzoo-backend", choices=("numpy", "torch"), default=None,
                help="what a lesson-style module's functions take (default: inferred, numpy)")
    g.addoption("--attnzoo-depth", choices=DEPTHS, default="standard",
                help="battery tier: quick, standard (default, as attnzoo check), deep")
    g.addoption("--attnzoo-dtype", choices=DTYPES, default=None,
                help="dtype of every call, when given, as attnzoo check --dtype (default "
                "float64, with every dtype tried where a property is about dtypes)")
    g.addoption("--attnzoo-device", default="cpu", help="torch device (default cpu)")
    g.addoption("--attnzoo-mask-convention", choices=("keep", "drop"), default="keep",
                help="bool mask: keep = True may attend (default); drop = True is masked")
    g.addoption("--attnzoo-causal-alignment", choices=("top-left", "bottom-right"),
                default="top-left", help="how is_causal aligns when L != S (default top-left)")
    g.addoption("--attnzoo-seed", type=int, default=0, help="seed of the case battery")
    g.addoption("--attnzoo-timeout", type=float, default=10.0, metavar="SECONDS",
                help="time limit per call (default 10)")
    g.addoption("--attnzoo-only", action="append", default=[], metavar="DETECTOR",
                help="only this detector (repeatable)")
    g.addoption("--attnzoo-expect", metavar="FILE", default=None,
                help="expectations file (TOML) of known failures: xfail, strict")


def pytest_configure(config):
    if not config.getoption("attnzoo_target"):
        return
    config.pluginmanager.register(Conformance(config), "attnzoo-conformance")


class Conformance:
    """The items of every target, and the worker process they share in this pytest process."""

    def __init__(self, config):
        from attnzoo import expectations
        from detectors import all_detectors, by_name

        self.config = config
        opt = config.getoption
        names = by_name()
        unknown = [n for n in opt("attnzoo_only") if n not in names]
        if unknown:
            raise pytest.UsageError(f"--attnzoo-only {unknown[0]}: no such detector; see "
                                    "'attnzoo detectors'")
        self.detectors = ([names[n] for n in dict.fromkeys(opt("attnzoo_only"))]
                          or all_detectors())
        self.expect_path = opt("attnzoo_expect")
        try:
            self.expected = (expectations.load(self.expect_path, names)
                             if self.expect_path else {})
        except expectations.ExpectationsError as e:
            raise pytest.UsageError(str(e)) from None
        if opt("attnzoo_timeout") <= 0:
            raise pytest.UsageError("--attnzoo-timeout must be a positive number of seconds")
        self.executor = None
        self.battery = None

    def start(self):
        if self.executor is None:
            from attnzoo.sandbox.isolated import Isolated
            from detectors.kit.battery import Battery

            opt = self.config.getoption
            self.executor = Isolated(call_seconds=opt("attnzoo_timeout"))
            self.battery = Battery(opt("attnzoo_seed"), depth=opt("attnzoo_depth"))
        return self.executor

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        from attnzoo.sandbox.target import BadTarget

        try:
            targets = [t for loc in config.getoption("attnzoo_target")
                       for t in resolve(self.start(), loc, config)]
        except BadTarget as e:
            raise pytest.UsageError(f"--attnzoo-target: {e}") from None
        for target in targets:
            for d in self.detectors:
                name = f"{d.NAME}[{target.locator}]"
                items.append(DetectorItem.from_parent(session, name=name, nodeid=name,
                                                      detector=d, target=target, owner=self))

    def pytest_unconfigure(self, config):
        if self.executor is not None:
            self.executor.close()

    def check(self, detector, target):
        from attnzoo.runner import run
        from detectors.kit.subject import Subject

        executor = self.start()
        if executor.target != target:
            executor.use(target)
        dtype = self.config.getoption("attnzoo_dtype")  # given: it scopes every call
        subject = Subject(target, executor, dtype or "float64", scoped=dtype is not None)
        return run(detector, subject, self.battery, shrink=True)


def resolve(executor, locator, config):
    """The implementations a locator names, with the conventions declared on the command line."""
    from attnzoo.check import BadInput, targets
    from attnzoo.sandbox.target import BadTarget

    opt = config.getoption
    try:
        return targets(executor, locator, opt("attnzoo_backend"),
                       mask_convention=opt("attnzoo_mask_convention"),
                       causal_alignment=opt("attnzoo_causal_alignment"),
                       device=opt("attnzoo_device"))
    except BadInput as e:
        raise BadTarget(str(e).replace("--backend", "--attnzoo-backend")) from None


class ConformanceFailure(Exception):
    """A detector flagged the target; the text is what ``attnzoo check`` prints for it."""


class DetectorItem(pytest.Item):
    def __init__(self, *, detector, target, owner, **kwargs):
        super().__init__(**kwargs)
        self.detector, self.target, self.owner = detector, target, owner
        self.user_properties.append(("attnzoo_detector", detector.NAME))

    def runtest(self):
        from attnzoo import expectations
        from detectors.kit.verdict import ERROR, NA

        finding = self.owner.check(self.detector, self.target)
        self.user_properties.append(("attnzoo_verdict", str(finding.verdict)))  # xdist: plain data
        expected = self.owner.expected.get(self.detector.NAME)
        outcome = expectations.judge(finding, expected)
        if finding.verdict == NA:
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
            raise ConformanceFailure(describe(finding))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


def describe(finding):
    """The finding as ``attnzoo check`` prints it: message, reproduction, notes."""
    from attnzoo.report import shrunk_lines

    lines, evidence = [finding.message], finding.evidence
    shrunk = evidence.shrunk if evidence is not None else None
    lines += [line.strip() for line in shrunk_lines(shrunk)]
    snippet = (shrunk or {}).get("snippet") or (evidence.snippet if evidence else "")
    if snippet:
        lines.append("reproduce:" + (" (the smallest case)" if shrunk and shrunk.get("snippet")
                                     else ""))
        lines += ["  " + s for s in snippet.splitlines()]
    lines += [f"note: {n}" for n in finding.notes]
    return "\n".join(lines)
