"""``attnzoo check --repro-dir``: standalone reproductions someone else can run.

Every script written for a flagged implementation is run the way a stranger would run it: from
another folder, in a fresh interpreter in isolated mode (``python -I``: neither the working
directory nor PYTHONPATH on ``sys.path``), with the modules it loaded listed afterwards. It
must fail with exit 1 and print expected, got and the difference, and load nothing of attnzoo
or the detectors. The same script with the reference put in place of the code under test must
pass: the expected value it writes out is the contract's, not the bug's.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnzoo.cli import main
from detectors.kit import claims
from detectors.kit.expect import Mismatch, agree
from detectors.kit.reproduce import Builder, readable

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# run a script by its path, then list what it imported of the project
RUN = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
    code = 0
except SystemExit as e:
    code = e.code
print("LOADED", *sorted(m for m in sys.modules if m.split(".")[0] in ("attnzoo", "detectors")))
sys.exit(code)
"""
# what a zoo file itself imports of the detectors: the names of the battery's tiers, its one
# door into the kit (tests/test_layout.py); a user's code imports none of it
ZOO_TIERS = {"detectors", "detectors.kit", "detectors.kit.depths"}
REFERENCE = {  # the correct implementation of each (contract, backend), as the script's impl
    ("lesson", "numpy"): "import reference.lesson_numpy as impl",
    ("lesson", "torch"): "import reference.lesson_torch as impl",
    ("sdpa", "torch"): "from reference.sdpa import scaled_dot_product_attention as impl",
}


def check(*args, cwd=REPO):
    """``attnzoo check ARGS --json`` in this process: (exit code, document, stderr)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["check", *args])
    finally:
        os.chdir(here)
    return code, (json.loads(out.getvalue()) if out.getvalue() else None), err.getvalue()


def run(path, cwd):
    return subprocess.run([PYTHON, "-I", "-c", RUN, str(path)], cwd=cwd, capture_output=True,
                          text=True, timeout=180, check=False)


def with_reference(text, target):
    """The script with the reference bound to ``impl`` right after the target is loaded."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines)
              if line.startswith("impl = ") or line.endswith(" as impl"))
    lines.insert(at + 1, REFERENCE[target["contract"], target["backend"]])
    return "\n".join(lines) + "\n"


def reproductions(tmp_path, locator, allowed=frozenset()):
    """Check ``locator`` with --repro-dir, run every script from another folder, and return
    the written records; ``allowed`` are modules of the project the target itself imports."""
    out = tmp_path / "repro"
    code, doc, err = check(locator, "--depth", "quick", "--json", "--repro-dir", str(out))
    assert code == 1, err
    assert doc["repro_dir"] == str(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    written = []
    for impl in doc["implementations"]:
        records = impl["reproductions"]
        assert len(records) == len(impl["diagnosis"]) > 0
        for record in records:
            assert record["status"] == "reproduces", record
            path = Path(record["file"])
            assert path.parent == out and path.name.endswith(f"-{record['detector']}.py")
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"^\s*(from|import) (attnzoo|detectors)\b", text, re.M)
            done = run(path, elsewhere)
            assert done.returncode == 1, (path.name, done.stdout[-3000:], done.stderr[-3000:])
            assert done.stderr == "", done.stderr  # no warning either
            printed = done.stdout.splitlines()
            assert re.search(r": expected .*, got .*, difference ", done.stdout), done.stdout
            assert "reproduced: the implementation still fails" in printed
            loaded = set(printed[-1].split()[1:])
            assert printed[-1].startswith("LOADED") and loaded <= set(allowed), loaded
            fixed = tmp_path / f"fixed-{path.name}"
            fixed.write_text(with_reference(text, impl["target"]), encoding="utf-8")
            done = run(fixed, elsewhere)
            assert done.returncode == 0, (fixed.name, done.stdout[-3000:], done.stderr[-3000:])
            assert "not reproduced: the implementation now passes this check" in done.stdout
            written.append(record)
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(r["file"]).name
                                                            for r in written)
    return written


def test_a_lesson_entry_reproduces_from_anywhere(tmp_path):
    """A lesson-contract zoo file, by path: NumPy and torch, one script each per root cause."""
    written = reproductions(tmp_path, "zoo/causal_mask_one_too_wide.py", ZOO_TIERS)
    assert {Path(r["file"]).name.split("-")[0] for r in written} == {"numpy", "torch"}


def test_an_sdpa_entry_reproduces_from_anywhere(tmp_path):
    """An SDPA-contract zoo entry, by module name: ``from zoo.… import SDPA as impl``."""
    written = reproductions(tmp_path, "zoo.gqa_repeat_instead_of_interleave:SDPA", ZOO_TIERS)
    text = Path(written[0]["file"]).read_text(encoding="utf-8")
    assert "from zoo.gqa_repeat_instead_of_interleave import SDPA as impl" in text


def test_a_user_callable_loads_nothing_of_attnzoo(tmp_path):
    """Code that is not the zoo's imports nothing of the project but the reference: its
    scripts load neither attnzoo nor the detectors at all."""
    reproductions(tmp_path, str(REPO / "tests/targets/root_causes.py") + ":two_causes")


def test_a_correct_implementation_writes_nothing(tmp_path):
    out = tmp_path / "repro"
    code, doc, err = check("reference/sdpa.py:scaled_dot_product_attention", "--depth", "quick",
                           "--json", "--repro-dir", str(out))
    assert code == 0, err
    assert doc["implementations"][0]["reproductions"] == []
    assert out.is_dir() and not list(out.iterdir())


@pytest.mark.parametrize("where", ["a-file", "missing/repro", ""])
def test_a_bad_repro_dir_is_one_line(tmp_path, where):
    (tmp_path / "a-file").write_text("")
    code, doc, err = check("reference/lesson_numpy.py", "--repro-dir", where, cwd=tmp_path)
    assert code == 2 and doc is None
    assert len(err.splitlines()) == 1 and err.startswith("attnzoo: error: --repro-dir"), err


# -- what a failure claims ----------------------------------------------------------------------


class _Answer:
    def __init__(self, out, fn="sdpa"):
        from detectors.kit.calls import Request

        q = np.zeros(out.shape[:-1] + (2,))
        self.out, self.weights, self.mutated, self.grads = out, None, (), None
        self.requests = (Request(fn, (q, q, np.zeros(out.shape))),)


def test_a_permutation_relation_is_read_off_the_compared_arrays():
    """``f(x)[P] = f(x[P])``: the expected side is the first answer taken by P along the
    queries' axis, the other the second answer as it came back."""
    rng = np.random.default_rng(0)
    base, moved = _Answer(rng.standard_normal((2, 5, 3))), _Answer(rng.standard_normal((2, 5, 3)))
    rows = np.array([4, 0, 3, 1, 2])
    with pytest.raises(Mismatch) as caught:
        agree(np.take(base.out, rows, axis=-2), moved.out, 1e-10)
    claim = claims.of(caught.value, [base, moved])
    assert claim.kind == "relation" and claim.atol == 1e-10
    assert claim.want == claims.Side(0, 0, (("take", tuple(rows.tolist()), -2),))
    assert claim.got == claims.Side(1, 0)


def test_orders_are_named_once_and_readably():
    assert readable((1, 2, 3, 0)) == "np.roll(np.arange(4), 3)"
    assert readable(tuple(range(9, -1, -1))) == "np.arange(10)[::-1]"
    assert readable((2, 0, 1, 3)) == "np.array([2, 0, 1, 3])"
    built = Builder(orders=True)  # (it names arrays by id: the test keeps them alive)
    q = np.arange(130 * 2, dtype=float).reshape(130, 2)
    mask = np.ones((130, 65), dtype=bool)
    mask[::2, 3] = False  # rows repeat: alone, the taken mask reads as [1, 0, 1, 0, ...]
    perm = np.roll(np.arange(130), 1)
    arrays = [q, np.take(q, perm, axis=0), mask, np.take(mask, perm, axis=0)]
    names = [built.name(a, role) for a, role in zip(arrays, ("Q", "Q", "mask", "mask"))]
    assert names == ["Q1", "Q2", "mask3", "mask4"]
    text = "\n".join(built.lines)
    assert text.count("perm = np.roll(np.arange(130), 1)") == 1
    assert "Q2 = np.take(Q1, perm, axis=-2)" in text
    assert "mask4 = np.take(mask3, perm, axis=-2)" in text


@pytest.mark.parametrize("contract,backend,convention,alignment", [
    ("sdpa", "torch", "keep", "top-left"), ("sdpa", "torch", "drop", "bottom-right"),
    ("lesson", "numpy", "keep", "top-left"), ("lesson", "torch", "drop", "top-left")])
def test_the_written_out_attention_is_the_oracle(contract, backend, convention, alignment):
    """The exact attention a script defines, run as the script runs it, against
    reference.exact on random calls: masks of either kind, is_causal, GQA, a scale."""
    import torch

    from detectors.kit.calls import Request
    from detectors.kit.script_prelude import _exact_helpers
    from reference import exact

    class Target:
        mask_convention, causal_alignment = convention, alignment

    Target.contract, Target.backend = contract, backend
    fns = ("sdpa",) if contract == "sdpa" else ("attention", "causal_self_attention")
    scope = {"np": np, "torch": torch}
    exec("\n".join(_exact_helpers(Target, [Request(fn, ()) for fn in fns])), scope)  # noqa: S102
    rng = np.random.default_rng(0)
    for _ in range(40):
        L, S, gqa = int(rng.integers(1, 6)), int(rng.integers(1, 6)), bool(rng.integers(2))
        gqa = gqa and contract == "sdpa"
        q, k, v = (rng.standard_normal((2, 4 if n == "q" or not gqa else 2, T, 3))
                   for n, T in (("q", L), ("k", S), ("v", S)))
        keep = rng.random((2, 1, L, S)) < 0.5
        bias = np.where(rng.random((L, S)) < 0.3, -np.inf, rng.standard_normal((L, S)))
        sent = keep if convention == "keep" else ~keep
        if contract == "lesson":
            got = scope["attention"](q, k, v, sent)
            want = exact.attend(q, k, v, mask=keep)
            for a, b in zip(got, want):
                np.testing.assert_allclose(np.asarray(a), b, atol=1e-12)
            continue
        causal, scale = bool(rng.integers(2)), [None, 0.7][int(rng.integers(2))]
        for mask, kwargs in ((sent, {"mask": keep}), (bias, {"bias": bias}), (None, {})):
            got = scope["attention"](q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                     enable_gqa=gqa)
            want = exact.attend(q, k, v, scale=scale, causal=alignment if causal else None,
                                gqa=gqa, **kwargs)[0]
            np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    if contract == "lesson":
        x, w = rng.standard_normal((2, 5, 4)), rng.standard_normal((3, 4, 3))
        got = scope["causal_self_attention"](x, *w)
        want = exact.attend(x @ w[0], x @ w[1], x @ w[2], causal="top-left")
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), b, atol=1e-12)
