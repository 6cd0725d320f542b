"""``attnzoo check --repro-dir DIR``: one standalone reproduction per root cause, run once.

Each root cause of the diagnosis gets the script of its smallest case
(``detectors.kit.script``), named by its number and detector (``01-matches_loop_oracle.py``,
with the implementation's backend in front when the target has several). Before the report
names a file, attnzoo runs it once, as someone pasting it elsewhere would: a fresh interpreter,
a temporary working directory, the file by its absolute path, with a time limit. A script
that does not fail, or fails otherwise than by its own comparison, is reported as such, never
passed off as a reproduction.
"""

import os
import subprocess
import sys
import tempfile

REPRODUCES, PASSES, TIMED_OUT, ERROR, NOT_WRITTEN = (
    "reproduces", "does not reproduce", "timed out", "error", "not written")
OUTPUT_LINES = 12  # the last lines of a run's output kept for the report


def seconds(options):
    """How long one script may run: importing the target and torch, then a few calls."""
    return options.import_timeout + 3 * options.timeout


def write(sections, options):
    """Write and run the scripts of every section's root causes (``section["scripts"]``);
    set ``section["reproductions"]``, one record per root cause."""
    folder = os.path.abspath(options.repro_dir)
    os.makedirs(folder, exist_ok=True)
    several = len(sections) > 1
    for section in sections:
        prefix = f"{section['target']['name'].rsplit('/', 1)[-1]}-" if several else ""
        records = []
        for i, (group, (text, why)) in enumerate(zip(section["diagnosis"],
                                                      section.get("scripts", ())), 1):
            smallest = group["smallest"]
            record = {"root_cause": i, "detector": smallest["detector"],
                      "case": smallest["case"], "file": None}
            if text is None:
                records.append({**record, "status": NOT_WRITTEN, "why": why})
                continue
            path = os.path.join(folder, f"{prefix}{i:02d}-{smallest['detector']}.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            records.append({**record, "file": path, **run(path, seconds(options))})
        section["reproductions"] = records


def run(path, limit):
    """Run one script: {"status", "exit_code", "output"} (its last lines, stdout then
    stderr). It reproduces when it exits 1 after saying so itself: an exception also exits
    1, and is an error of the script or of the import, not the failure."""
    with tempfile.TemporaryDirectory(prefix="attnzoo-repro-") as here:
        try:
            done = subprocess.run([sys.executable, path], cwd=here, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as e:
            return {"status": TIMED_OUT, "exit_code": None,
                    "output": _last(_text(e.stdout) + _text(e.stderr))
                    + [f"(stopped after {limit:g} s)"]}
    said = done.stdout.strip().splitlines()[-1:] or [""]
    if done.returncode == 1 and said[0].startswith("reproduced:"):
        status = REPRODUCES
    elif done.returncode == 0 and said[0].startswith("not reproduced:"):
        status = PASSES
    else:
        status = ERROR
    return {"status": status, "exit_code": done.returncode,
            "output": _last(done.stdout + done.stderr)}


def _text(data):
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def _last(text):
    return text.rstrip().splitlines()[-OUTPUT_LINES:]


def lines(r):
    """The report's lines for one root cause's reproduction record (under its diagnosis
    entry): the file, whether it reproduced, and what it printed of the difference."""
    if not r:
        return []
    if r["file"] is None:
        return [f"     reproduction: not written ({r['why']})"]
    shown = [ln for ln in r["output"]
             if ": expected " in ln or ln.startswith(("expected ", "got "))]
    status = r["status"]
    if status == ERROR:
        shown = r["output"][-1:]
    if status == TIMED_OUT:
        status = f"timed out: {r['output'][-1].strip('()')}"
    return [f"     reproduction: {r['file']} ({status})"] + [f"       {ln}" for ln in shown[:4]]
