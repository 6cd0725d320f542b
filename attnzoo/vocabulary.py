"""The words, glyphs and colours of verdicts, defined once.

Two vocabularies, both data. A *verdict* is what one detector says about one implementation
(``detectors.kit.verdict``): ``check`` prints its word, ``gpu`` its mark, and ``caught`` says
whether it flags the implementation. A *cell kind* is what a verdict means on a row of the kill
matrix, where the row's metadata says whether the catch was expected: the matrix prints its
glyph, the docs colour the heatmap with it, and ``failure`` says whether it fails the run.
"""

from dataclasses import dataclass

from detectors.kit import verdict as kit
from detectors.kit.verdict import CRASHED, ERROR, HUNG, KILLED, NA, NAN, SURVIVED
from detectors.kit.verdict import UNSUPPORTED as UNSUPPORTED_NAME


@dataclass(frozen=True)
class Verdict:
    name: str  # as findings and JSON spell it
    word: str  # in the text report of ``attnzoo check``
    mark: str  # in the table of ``attnzoo gpu``

    @property
    def caught(self):  # does it flag the implementation? (detectors.kit.verdict decides)
        return kit.Verdict(self.name).caught


@dataclass(frozen=True)
class CellKind:
    name: str  # as the matrix JSON spells it
    glyph: str  # one character in the text and markdown matrices and the pages
    meaning: str  # the legend of the text and markdown matrices and the pages
    label: str  # the legend of the heatmap
    colour: str  # the heatmap's fill
    caught: bool  # was the row caught?
    failure: bool  # does it fail the test run?
    marked: bool  # is the glyph drawn on the heatmap too?


VERDICTS = {v.name: v for v in (
    Verdict(SURVIVED, "ok", "ok"),
    Verdict(KILLED, "FLAGGED", "FAIL"),
    Verdict(NAN, "NaN", "NaN"),
    Verdict(CRASHED, "CRASH", "CRASH"),
    Verdict(HUNG, "HANG", "HANG"),
    Verdict(NA, "n/a", "-"),
    # every case the detector needed is outside what the target declares or accepts
    Verdict(UNSUPPORTED_NAME, "unsupported", "unsup"),
    Verdict(ERROR, "ERROR", "ERR"),
)}
UNSUPPORTED = VERDICTS[UNSUPPORTED_NAME]
CAUGHT = kit.CAUGHT

CELLS = {k.name: k for k in (
    CellKind("hit", "●", "expected and caught", "hit: caught, as its metadata expects",
             "#1a7a3a", True, False, False),
    CellKind("bonus", "○", "caught, not listed in the entry's caught_by",
             "bonus: caught, not in caught_by", "#8fd18a", True, False, False),
    CellKind("crash", "✕", "caught because the implementation crashed or hung",
             "crash: caught because it raised or hung", "#3b6fb6", True, False, True),
    CellKind("miss", "!", "expected but survived (a failure)", "miss: expected, but survived",
             "#d7301f", False, True, True),
    CellKind("false", "✗", "a correct implementation was flagged (a failure)",
             "false alarm on a correct row", "#9e2a8f", True, True, True),
    CellKind("pass", "·", "survived", "pass: survived / correct and clean", "#d4d4d4",
             False, False, False),
    CellKind("na", "-", "not applicable", "n/a: the detector does not apply", "#ffffff",
             False, False, False),
    CellKind("error", "E", "the detector itself failed (a failure)",
             "error: the detector itself failed", "#111111", False, True, True),
)}
CAUGHT_CELLS = tuple(k.name for k in CELLS.values() if k.caught and not k.failure)
FAILURES = tuple(k.name for k in CELLS.values() if k.failure)


def glyph(kind):
    """The cell's glyph; a missing cell reads as n/a."""
    return CELLS[kind or "na"].glyph


def legend(separator="   "):
    """The glyphs and their meanings, in the matrix's order."""
    return separator.join(f"{k.glyph} {k.meaning}" for k in CELLS.values())
