"""The report of ``attnzoo.check()`` as objects: frozen dataclasses of plain data.

Built from the JSON document ``attnzoo check --json`` prints, never from anything of the
worker's, so what a pipeline branches on is exactly what the command line reports.
"""

import copy
from dataclasses import dataclass, field
from typing import Any


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
    # with budget_s, per implementation: the tiers each detector reached, the clauses and the
    # input-space values its calls covered, and {tier: detectors that did not reach it}
    reached: dict = field(default_factory=dict, compare=False)

    @property
    def flagged(self) -> tuple[Finding, ...]:
        """The findings that flag the target."""
        return tuple(f for f in self.findings if f.flagged)

    @property
    def incomplete(self) -> bool:
        """The budget ran out before every detector ran every tier of the depth: the verdict
        covers only part."""
        return bool(self.not_run) or any(r.get("unreached") for r in self.reached.values())

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


def report(document, code, detectors, texts, not_run):
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
    reached = {impl["target"]["name"]: {**impl["reached"], "unreached": impl["unreached"]}
               for impl in document["implementations"] if "reached" in impl}
    return Report(document["target"], bool(document["summary"]["conformant"]), code,
                  tuple(findings), tuple(causes), tuple(resembles), tuple(reproductions),
                  not_run, document["seconds"], document, texts, reached)
