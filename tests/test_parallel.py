"""pytest-xdist gives the kill matrix that a serial run gives, cell for cell."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnzoo.matrix import model as matrix
from attnzoo.matrix.model import from_json

ROOT = Path(__file__).resolve().parents[1]
# A slice across backends and kinds keeps this test short; `attnzoo bench` compares the whole
# matrix.
ROWS = "reference-numpy or reference-sdpa or mask-fill-zero or gqa-repeat or flash-tiled-torch"


def matrix_json(tmp_path, name, *args):
    path = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", "tests/test_kill_matrix.py", "-q", "-p",
           "no:cacheprovider", "-k", ROWS, "--kill-matrix-json", str(path), *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:]
    return json.loads(path.read_text())


def test_parallel_kill_matrix_equals_serial(tmp_path):
    """`pytest -n 2` against the same cells evaluated serially, in this process."""
    parallel = matrix_json(tmp_path, "parallel", "-n", "2")
    labels = {r["row"] for r in parallel["rows"]}
    serial = matrix.evaluate(0, select=lambda row: row.label in labels).to_json()
    assert len(serial["rows"]) == 6
    assert from_json(serial) == from_json(parallel)
    assert serial["summary"] == parallel["summary"]


def test_matrix_in_forked_processes_equals_serial():
    """`attnzoo matrix --jobs 2` spreads rows over processes; every cell is the serial one."""
    ids = ("reference", "mask-fill-zero", "gqa-repeat-instead-of-interleave")
    picked = lambda row: row.id in ids  # noqa: E731
    serial, forked = matrix.evaluate(0, select=picked), matrix.evaluate(0, select=picked, jobs=2)
    assert [r.label for r in forked.rows] == [r.label for r in serial.rows]
    assert from_json(forked.to_json()) == from_json(serial.to_json())
    assert forked.summary() == serial.summary()


def test_matrix_without_snippets_has_the_same_cells_and_no_reproduction():
    """Text and markdown show no reproduction, so they are not written: the cells stay."""
    picked = lambda row: row.id in ("reference", "mask-fill-zero")  # noqa: E731
    full = matrix.evaluate(0, select=picked)
    bare = matrix.evaluate(0, select=picked, jobs=2, snippets=False)
    assert from_json(bare.to_json()) == from_json(full.to_json())
    caught = [k for k, f in full.findings.items() if f.caught]
    assert caught and all(full.findings[k].evidence.snippet for k in caught)
    assert not any(bare.findings[k].evidence.snippet for k in caught)


def test_gpu_table_without_a_gpu_says_so_and_exits_0():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: 'attnzoo gpu' runs the real table there")
    done = subprocess.run([sys.executable, "-m", "attnzoo", "gpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "no CUDA device" in done.stdout


def test_gpu_table_runs_on_the_cpu(tmp_path):
    out = tmp_path / "table.json"
    done = subprocess.run([sys.executable, "-m", "attnzoo", "gpu", "--device", "cpu",
                           "--output", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    doc = json.loads(out.read_text())
    cells = doc["cells"]
    assert all(v["verdict"] in ("survived", "n/a", "unsupported") for v in cells.values())
    assert cells["matches_loop_oracle|MATH/float16"]["verdict"] == "survived"
