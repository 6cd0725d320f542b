"""``attnzoo.check(...)``: the detectors as a function call, for code that generates kernels.

A pipeline that writes attention code wants a verdict it can branch on, not a subprocess and a
JSON parse. This is ``attnzoo check`` without the command line: the same options
(:class:`attnzoo.options.Options`), the same run (:func:`attnzoo.checking.run_check`), the same
document and text. The code under test still never runs in the caller's process: a callable or
a source string is written as a module (attnzoo.carry) into a private temporary folder and
checked by its file locator in attnzoo's worker, and only the report's plain data comes back.
docs/api.md.
"""

import copy
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from attnzoo.options import BadInput, Options

CONTRACTS = ("sdpa", "lesson")
# the command line's spelling of an option, in a BadInput line, respelt as this API's keyword
KEYWORDS = {"--deadline": "budget_s", "--timeout": "timeout_s", "--import-timeout":
            "import_timeout_s", "--warmup": "warmup_s", "--repro-dir": "repro_dir",
            "--memory-limit": "memory_limit", "--scratch-limit": "scratch_limit",
            "--mask-convention": "mask_convention", "--causal-alignment": "causal_alignment",
            "--empty-rows": "empty_rows", "--backend": "backend", "--dtype": "dtype",
            "--depth": "depth", "--device": "device", "--seed": "seed", "--isolation":
            "isolation", "--unsupported": "unsupported"}


@dataclass(frozen=True)
class Finding:
    """One detector's verdict on one implementation, with the evidence of a failure: what a
    pipeline logs or feeds back to whatever wrote the kernel."""

    detector: str
    implementation: str  # the report's name of the implementation (a zoo file holds several)
    verdict: str  # killed, nan, crashed, hung (flagged); survived, n/a, unsupported, error
    flagged: bool
    message: str
    property: str  # the detector's one sentence: what correct attention must satisfy
    call: str | None = None  # the failing call, with shapes and dtypes
    case: str | None = None  # the battery's case it failed on
    expected: Any = None
    actual: Any = None
    snippet: str | None = None  # lines that reproduce it (the smallest case's, when shrunk)

    @property
    def passed(self) -> bool:
        """The property held on every case (the detector "survived", in the zoo's words)."""
        return self.verdict == "survived"


@dataclass(frozen=True)
class Reproduction:
    """A standalone script written for one root cause (``repro_dir``), run once by attnzoo."""

    implementation: str
    root_cause: int  # its number in the diagnosis, from 1
    detector: str
    file: str | None  # None when none could be written (``why``)
    status: str  # reproduces, does not reproduce, timed out, error, not written
    why: str = ""

    @property
    def reproduces(self) -> bool:
        return self.status == "reproduces"


@dataclass(frozen=True)
class RootCause:
    """One line of the diagnosis: failing cases grouped by the feature they share."""

    implementation: str
    sentence: str
    feature: str | None  # None: no single feature explains these failures
    detectors: tuple[str, ...]
    failing: int  # failing cases it explains
    smallest_call: str
    smallest_detector: str
    reproduction: Reproduction | None = None


@dataclass(frozen=True)
class Resemblance:
    """A zoo entry whose detectors flag as the target's do: a likely name for the bug."""

    implementation: str
    id: str
    similarity: float  # Jaccard similarity of the two sets of flagging detectors
    shared: tuple[str, ...]
    lesson: str
    page: str


@dataclass(frozen=True, repr=False)
class Report:
    """What ``attnzoo check`` reports, as objects: branch on ``conformant`` or ``exit_code``,
    read ``findings``, keep ``to_json()`` (the ``--json`` document) as the record."""

    target: str
    conformant: bool
    exit_code: int  # 0 clean, 1 flagged, 3 a detector failed, 4 the budget ran out first
    findings: tuple[Finding, ...]
    diagnosis: tuple[RootCause, ...]
    resembles: tuple[Resemblance, ...]
    reproductions: tuple[Reproduction, ...]
    not_run: tuple[str, ...]  # detectors the budget (deadline) left unrun
    seconds: float
    _document: dict = field(compare=False)  # to_json() gives a copy
    _texts: tuple[str, str] = field(compare=False)  # text(), plain and verbose

    @property
    def flagged(self) -> tuple[Finding, ...]:
        """The findings that flag the target."""
        return tuple(f for f in self.findings if f.flagged)

    @property
    def incomplete(self) -> bool:
        """The budget ran out before every detector ran: the verdict covers only part."""
        return bool(self.not_run)

    def to_json(self) -> dict:
        """The document ``attnzoo check --json`` prints for the same run (docs/check-json.md);
        for a callable or a source, ``target`` is the name the report gives it."""
        return copy.deepcopy(self._document)

    def text(self, verbose: bool = False) -> str:
        """What ``attnzoo check`` prints (``verbose``: ``-v``, which also says why each n/a)."""
        return self._texts[bool(verbose)]

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return (f"Report(target={self.target!r}, conformant={self.conformant}, "
                f"exit_code={self.exit_code}, flagged={[f.detector for f in self.flagged]}, "
                f"not_run={list(self.not_run)}, seconds={self.seconds})")


def check(
    fn_or_locator: Callable[..., Any] | str | os.PathLike,
    contract: str | None = "sdpa",
    *,
    name: str | None = None,
    depth: str = "quick",
    dtype: str | None = None,
    device: str = "cpu",
    budget_s: float | None = None,
    seed: int = 0,
    only: Iterable[str] | str | None = None,
    expect: str | os.PathLike | None = None,
    repro_dir: str | os.PathLike | None = None,
    isolation: str | None = None,
    backend: str | None = None,
    mask_convention: str = "keep",
    causal_alignment: str = "top-left",
    empty_rows: str = "zero",
    unsupported: Iterable[str] | str = (),
    refuses: Iterable[str] = (),
    timeout_s: float | None = None,
    import_timeout_s: float | None = None,
    warmup_s: float | None = None,
    memory_limit: int | str | None = None,
    scratch_limit: int | str | None = None,
    shrink: bool = True,
    progress: bool = False,
) -> Report:
    """Run the detectors on attention, in attnzoo's worker process; the report as objects.

    ``fn_or_locator``: a locator as ``attnzoo check`` takes (``path/to/file.py:func``,
    ``pkg.mod:func``, ``module.py``), a function (its source is read, a notebook cell's too), or
    Python source defining it (``name`` picks the function; else the last top-level ``def``).
    ``contract``: "sdpa" (F.scaled_dot_product_attention's signature, torch) or "lesson" (a
    module with the lesson's functions, ``backend`` numpy or torch, inferred when None); None,
    for a locator only, checks whatever it names as ``attnzoo check`` does (a zoo file: each of
    its implementations). ``budget_s`` is ``--deadline``: None is the depth's default, 0 none;
    when it runs out the report is partial and ``exit_code`` 4 unless something was flagged.
    ``progress`` writes the command line's progress lines on stderr. The other keywords are
    ``attnzoo check``'s options (docs/check.md). Bad input raises :class:`BadInput`, one line.
    """
    if contract not in CONTRACTS + (None,):
        raise BadInput(f"contract must be 'sdpa' (F.scaled_dot_product_attention's signature) "
                       f"or 'lesson' (the lesson's module of functions), not {contract!r}")
    if contract == "sdpa" and backend not in (None, "torch"):
        raise BadInput(f"the sdpa contract takes torch tensors: backend must be 'torch' or None, "
                       f"not {backend!r}")
    options = _options(depth=depth, dtype=dtype, device=device, deadline=budget_s, seed=seed,
                       only=(only,) if isinstance(only, str) else tuple(only or ()),
                       expect=_path(expect), repro_dir=_path(repro_dir), isolation=isolation,
                       backend=backend, mask_convention=mask_convention,
                       causal_alignment=causal_alignment, empty_rows=empty_rows,
                       unsupported=unsupported, refuses=tuple(refuses or ()), timeout=timeout_s,
                       warmup=warmup_s, memory_limit=memory_limit, scratch_limit=scratch_limit,
                       shrink=shrink,
                       **({} if import_timeout_s is None else {"import_timeout": import_timeout_s}))
    target = os.fspath(fn_or_locator) if isinstance(fn_or_locator, os.PathLike) else fn_or_locator
    from attnzoo import carry

    if isinstance(target, str) and not carry.is_source(target):
        if name is not None:
            raise BadInput("name= picks a function of a source string; a locator names its own "
                           "('file.py:func')")
        _agrees(target, contract)
        return _run(target, options, contract, None, progress)
    if isinstance(target, str):
        module = carry.from_source(target, contract or "sdpa", name)
    elif callable(target):
        if name is not None:
            raise BadInput("name= picks a function of a source string; a function is checked "
                           "by its own name")
        module = carry.from_callable(target, contract or "sdpa")
    else:
        raise BadInput(f"attnzoo.check takes a function, Python source or a locator string, not "
                       f"a {type(target).__name__}")
    kept = options.repro_dir is not None  # the reproductions import it: it stays beside them
    folder = os.path.abspath(options.repro_dir) if kept else \
        tempfile.mkdtemp(prefix="attnzoo-check-")  # private: mode 0700
    try:
        os.makedirs(folder, exist_ok=True)
        path = carry.write(module, folder)
        locator = path if module.function is None else f"{path}:{module.function}"
        return _run(locator, options, contract or "sdpa", module.display, progress)
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)


def _path(value):
    return None if value is None else os.fspath(value)


def _options(**values):
    """Options.build, its BadInput spelling each option as this API's keyword."""
    try:
        return Options.build(**values)
    except BadInput as e:
        raise BadInput(re.sub(r"--[a-z][a-z-]*", lambda m: KEYWORDS.get(m[0], m[0]), str(e))) \
            from None


def _agrees(locator, contract):
    """Refuse, before anything runs, a module locator under the sdpa contract: the command
    line checks a module by the lesson contract (a callable is named as ``file.py:func``)."""
    from attnzoo.sandbox.target import BadTarget, _split

    try:
        _, _, attr = _split(locator)
    except BadTarget as e:
        raise BadInput(str(e)) from None
    if contract == "sdpa" and not attr:
        raise BadInput(f"{locator} names a module, which is checked by the lesson contract: name "
                       f"its callable ('{locator}:func'), pass contract='lesson', or contract=None "
                       "to check it as attnzoo check does")


class _Quiet:
    """A stderr for the progress lines nobody asked for."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


def _run(locator, options, contract, display, progress):
    """run_check as ``attnzoo check`` runs it; the Report, or BadInput when the locator named
    another contract than the one asked for."""
    from attnzoo.checking import run_check
    from attnzoo.progress import Progress
    from attnzoo.report import check_text

    sections, detectors, document, code = run_check(
        locator, options, name=display, progress=None if progress else Progress(_Quiet()))
    kinds = {impl["target"]["contract"] for impl in document["implementations"]}
    if contract is not None and kinds - {contract}:
        raise BadInput(f"{locator} holds {' and '.join(sorted(kinds))} implementations, not "
                       f"only {contract}: pass contract={sorted(kinds)[0]!r}, or contract=None "
                       "to check whatever it names")
    if display is not None:
        document["target"] = display
    unrun = [n for s in sections for n in s["not_run"]]
    if document["summary"]["not_run"] > len(unrun):  # implementations the deadline left unloaded
        unrun += list(detectors)
    texts = (check_text(sections, detectors, options, document),
             check_text(sections, detectors, options, document, verbose=True))
    return _report(document, code, detectors, texts, tuple(dict.fromkeys(unrun)))


def _report(document, code, detectors, texts, not_run):
    """The Report of a check's JSON document: plain data, nothing of the worker's."""
    from detectors.kit.verdict import CAUGHT

    caught = {str(v) for v in CAUGHT}
    findings, causes, resembles, reproductions = [], [], [], []
    for impl in document["implementations"]:
        name = impl["target"]["name"]
        for f in impl["findings"]:
            ev = f.get("evidence") or {}
            shrunk = ev.get("shrunk") or {}
            findings.append(Finding(
                f["detector"], name, f["verdict"], f["verdict"] in caught, f["message"],
                getattr(detectors.get(f["detector"]), "PROPERTY", ""), ev.get("call"),
                ev.get("case"), ev.get("expected"), ev.get("actual"),
                shrunk.get("snippet") or ev.get("snippet")))
        records = [Reproduction(name, r["root_cause"], r["detector"], r["file"], r["status"],
                                r.get("why", "")) for r in impl.get("reproductions", [])]
        reproductions += records
        for i, g in enumerate(impl["diagnosis"]):
            causes.append(RootCause(name, g["sentence"], g["feature"], tuple(g["detectors"]),
                                    g["failing"], g["smallest"]["call"],
                                    g["smallest"]["detector"],
                                    records[i] if i < len(records) else None))
        resembles += [Resemblance(name, r["id"], r["similarity"], tuple(r["shared"]),
                                  r["lesson"], r["page"]) for r in impl["resembles"]]
    return Report(document["target"], bool(document["summary"]["conformant"]), code,
                  tuple(findings), tuple(causes), tuple(resembles), tuple(reproductions),
                  not_run, document["seconds"], document, texts)
