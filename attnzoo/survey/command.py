"""``attnzoo survey``: every installed adapter, each dtype it supports; JSON, markdown, summary."""

import json
import os
import sys
import time
from pathlib import Path

from attnzoo.survey import run, write

DTYPES = ("float32", "float64")


def main(only=None, output_dir="docs", dtypes=None, seed=0, depth=run.DEPTH, budget=run.BUDGET):
    """Exit code: 0 when it ran (findings are the survey's content, not a failure), 2 bad input."""
    try:
        chosen = run.select(only)
    except KeyError as e:
        print(f"attnzoo: error: no surveyed implementation {e.args[0]!r}: names are "
              f"{', '.join(d.name for _, d in run.select(None))}", file=sys.stderr)
        return 2
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        print(f"attnzoo: error: --output-dir {output_dir} is a file: name a folder",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    doc = run.survey(chosen, dtypes, seed, progress=lambda s: print(s, flush=True), depth=depth,
                     budget=budget)
    ran = [r for r in doc["implementations"] if r["runs"]]
    for path in write.write(doc, output_dir):
        print(f"wrote {path}")
    print(f"{len(ran)} of {len(doc['implementations'])} implementations surveyed in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


def render(output_dir="docs"):
    """``attnzoo survey --render-only``: survey.md again from the survey.json already in
    ``output_dir`` (the adapters' reviews of its findings included), without running anything.
    Exit code 0, or 2 when there is no survey.json to read."""
    source = Path(output_dir) / "survey.json"
    if not source.is_file():
        print(f"attnzoo: error: no {source} to render: run attnzoo survey first",
              file=sys.stderr)
        return 2
    page = Path(output_dir) / "survey.md"
    page.write_text(write.markdown(json.loads(source.read_text(encoding="utf-8"))),
                    encoding="utf-8")
    print(f"wrote {page}")
    return 0


def varlen_main(only=None, output_dir="docs", dtypes=None, seed=0, depth=None, deadline=None):
    """``attnzoo survey --contract varlen``: the varlen adapters; survey-varlen.json and .md.
    Exit code 0 when it ran, 2 on bad input."""
    from attnzoo.survey import varlen_run, varlen_write

    try:
        chosen = varlen_run.select(only)
    except KeyError as e:
        print(f"attnzoo: error: no surveyed varlen implementation {e.args[0]!r}: names are "
              f"{', '.join(d.name for _, d in varlen_run.select(None))}", file=sys.stderr)
        return 2
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        print(f"attnzoo: error: --output-dir {output_dir} is a file: name a folder",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    doc = varlen_run.survey(chosen, dtypes, seed, progress=lambda s: print(s, flush=True),
                            depth=depth or varlen_run.DEPTH,
                            deadline=varlen_run.DEADLINE if deadline is None else deadline)
    ran = [r for r in doc["implementations"] if r["runs"]]
    for path in varlen_write.write(doc, output_dir):
        print(f"wrote {path}")
    print(f"{len(ran)} of {len(doc['implementations'])} varlen implementations surveyed in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


def varlen_render(output_dir="docs"):
    """``attnzoo survey --contract varlen --render-only``: survey-varlen.md again from the
    survey-varlen.json in ``output_dir``, the adapters' reviews included. 0, or 2 without one."""
    from attnzoo.survey import varlen_write

    source = Path(output_dir) / varlen_write.JSON
    if not source.is_file():
        print(f"attnzoo: error: no {source} to render: run attnzoo survey --contract varlen "
              "first", file=sys.stderr)
        return 2
    page = Path(output_dir) / varlen_write.PAGE
    page.write_text(varlen_write.markdown(json.loads(source.read_text(encoding="utf-8"))),
                    encoding="utf-8")
    print(f"wrote {page}")
    return 0
