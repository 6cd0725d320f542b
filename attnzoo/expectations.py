"""Known non-conformance: an expectations file, honoured by the pytest plugin and ``attnzoo check``.

The file is TOML, one table per detector the target is known to fail, with the reason and,
optionally, a link to where it is tracked::

    # attnzoo expectations for mypkg.attn:sdpa
    [causality]
    reason = "the kernel is bidirectional by design"
    link = "https://example.org/issues/12"

An expected failure is reported as xfail with its reason. Expectations are strict, as
array-api-tests' xfails file is: a detector that holds although it is expected to fail is a
failure (remove the entry), and a table that names no detector is an error, so a typo can never
silently excuse a failure.
"""

import os
import stat
import tomllib
from dataclasses import dataclass

from detectors.kit.verdict import CAUGHT, SURVIVED

KEYS = ("reason", "link")
MAX_BYTES = 1 << 20  # a table per detector takes a few kilobytes; a mebibyte is no such file


class ExpectationsError(Exception):
    """The file cannot be used: one line naming the file, the entry and the fix."""


@dataclass(frozen=True)
class Expectation:
    detector: str
    reason: str
    link: str = ""

    def describe(self):
        return self.reason + (f" ({self.link})" if self.link else "")


def load(path, known):
    """{detector: Expectation} from the file at ``path``; ``known`` are the detector names."""
    try:
        data = tomllib.loads(read(path).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ExpectationsError(f"{path}: not valid TOML: {e}: fix the file") from None
    out = {}
    for name, entry in data.items():
        if name not in known:
            raise ExpectationsError(f"{path}: [{name}] matches no detector: see "
                                    "'attnzoo detectors' for their names")
        if not isinstance(entry, dict):
            raise ExpectationsError(f"{path}: {name} must be a table: [{name}] with "
                                    "reason = \"...\"")
        extra = sorted(set(entry) - set(KEYS))
        if extra:
            raise ExpectationsError(f"{path}: [{name}] has unknown key {extra[0]!r}: use "
                                    "reason and link")
        reason, link = entry.get("reason"), entry.get("link", "")
        if not isinstance(reason, str) or not reason.strip():
            raise ExpectationsError(f"{path}: [{name}] needs reason = \"why it is known to "
                                    "fail\"")
        if not isinstance(link, str):
            raise ExpectationsError(f"{path}: [{name}] link must be a string")
        out[name] = Expectation(name, reason.strip(), link.strip())
    return out


def read(path):
    """The bytes of a regular file of at most :data:`MAX_BYTES`. Opened without waiting, so a
    FIFO nobody writes to, /dev/zero or a file that grows without end is refused at once
    instead of being read until memory runs out."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise ExpectationsError(f"no such expectations file: {path}") from None
    except OSError as e:
        raise ExpectationsError(f"{path}: cannot be opened ({e.strerror}): give a TOML "
                                "file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExpectationsError(f"{path} is not a regular file: give a TOML file")
    with open(fd, "rb") as f:
        try:
            data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise ExpectationsError(f"{path}: cannot be read ({e.strerror}): give a TOML "
                                    "file") from None
    if len(data) > MAX_BYTES:
        raise ExpectationsError(f"{path} is over {MAX_BYTES // 1024} KiB, more than "
                                "expectations ever take: give the TOML file of expectations")
    return data


def judge(finding, expectation):
    """'xfail' (failed as expected), 'xpass' (held though expected to fail) or None."""
    if expectation is None:
        return None
    if finding.verdict in CAUGHT:
        return "xfail"
    if finding.verdict == SURVIVED:
        return "xpass"
    return None  # n/a or a detector error: the expectation neither holds nor fails


def annotate(sections, entries):
    """Count each implementation's expected failures into its summary, and call it conformant
    when every flagged detector was expected to fail and none held unexpectedly."""
    for s in sections:
        mine = [e for e in entries if e["implementation"] == s["target"]["name"]]
        xfail = sum(1 for e in mine if e["outcome"] == "xfail")
        summary = s["summary"]
        summary["expected_failures"] = xfail
        if xfail and xfail == summary["flagged"] and all(e["outcome"] == "xfail" for e in mine) \
                and not summary.get("errors") and not summary.get("not_run"):
            summary["conformant"] = True


def report(sections, expectations, path):
    """Lines for ``attnzoo check`` and the JSON entries, and whether anything unexpected failed.

    Returns (lines, entries, unexpected): ``unexpected`` is true when a detector flagged that no
    expectation covers, or when an expected failure did not happen.
    """
    lines, entries, unexpected = [], [], False
    for s in sections:
        for f in s["findings"]:
            outcome = judge(f, expectations.get(f.detector))
            if outcome is None:
                unexpected |= f.verdict in CAUGHT
                continue
            e = expectations[f.detector]
            entries.append({"implementation": s["target"]["name"], "detector": f.detector,
                            "outcome": outcome, "reason": e.reason, "link": e.link})
            if outcome == "xfail":
                lines.append(f"xfail  {f.detector} on {s['target']['name']}: {e.describe()}")
            else:
                unexpected = True
                lines.append(f"XPASS  {f.detector} on {s['target']['name']}: expected to fail "
                             f"({e.describe()}) but held on every case: remove it from {path}")
    return lines, entries, unexpected
