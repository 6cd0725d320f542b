"""The proxy a graded test is handed (attnzoo/grade/proxy.py), and the grade it makes.

The proxy must behave as the implementation does — the same answers, the same writes into the
caller's arrays, the same objects returned, the same gradients, the same exception types — and
expose nothing of which implementation it is. The first is checked by running one script of
calls on every zoo row twice, directly and through the proxy, and comparing everything the
script can observe; the second by what a test can read from the object, and by whole grades of
hostile suites (tests/targets/grade/): one that tries to identify the implementation catches
nothing, one that kills its neighbours changes only its own verdicts and leaves nothing running.
"""

import builtins
import gc
import inspect
import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

import zoo
from attnzoo.grade import model, proxy
from attnzoo.grade import run as runner
from attnzoo.grade.run import Suite
from attnzoo.sandbox import hygiene, relay, zygote
from attnzoo.sandbox.target import load, renewed

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "tests" / "targets" / "grade"
IMPLS = ROOT / "tests" / "targets" / "grade" / "impl"


def rows(contract, backend="numpy"):
    return [r for r in model.implementations([contract], backend)]


class Relayed:
    """An implementation in its relay worker, and a proxy on it."""

    def __init__(self, locator, contract, backend, canary=False):
        self.worker = runner.Relay({"locator": locator, "contract": contract,
                                    "canary": canary}, None)
        self.worker.ready()
        self.connection = proxy.Connection(self.worker.sock, self.worker.functions, backend)
        self.contract = contract

    def fresh(self):
        self.connection.fresh()
        if self.contract == "sdpa":
            return proxy.Callable(self.connection)
        return proxy.Lesson(self.connection)

    def close(self):
        self.worker.close()


@pytest.fixture
def relayed():
    made = []

    def make(*args, **kwargs):
        made.append(Relayed(*args, **kwargs))
        return made[-1]

    yield make
    for r in made:
        r.close()


# -- the same behaviour -----------------------------------------------------------------------


def observe(value):
    """What a test can see of a value: arrays as (type, dtype, shape, strides kind, bytes)."""
    import torch

    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.name, value.shape, value.flags.c_contiguous,
                value.flags.writeable, np.nan_to_num(value, nan=7.5).tobytes())
    if isinstance(value, torch.Tensor):
        t = value.detach()
        return ("pt", str(t.dtype), tuple(t.shape), t.stride(), t.requires_grad,
                torch.nan_to_num(t.float(), nan=7.5).numpy().tobytes())
    if isinstance(value, (tuple, list)):
        return type(value).__name__, [observe(v) for v in value]
    if isinstance(value, dict):
        return {k: observe(v) for k, v in value.items()}
    return value


def attempt(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return ("raised", type(e).__name__)


def lesson_script(impl):
    """Calls a lesson test makes; everything it can observe afterwards."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((4, 8)) for _ in range(3))
    x = rng.standard_normal((2, 5))
    x_before = x.copy()
    seen = {"mask": attempt(impl.causal_mask, 4), "softmax": attempt(impl.softmax, x)}
    seen["x after softmax"] = x
    seen["x written"] = not np.array_equal(x, x_before)
    seen["softmax is x"] = seen["softmax"] is x
    mask = np.tril(np.ones((4, 4), dtype=bool))
    first = attempt(impl.attention, q, k, v, mask)
    seen["attention"] = first
    seen["q after"] = q
    second = attempt(impl.attention, q[::-1], k.T.copy().T, v, None)  # strided inputs
    seen["attention strided"] = second
    seen["first after second"] = first
    X = rng.standard_normal((2, 4, 16))
    W = [rng.standard_normal((16, 8)) for _ in range(3)]
    seen["self"] = attempt(impl.causal_self_attention, X, *W)
    seen["read-only"] = attempt(impl.softmax, _read_only(rng.standard_normal((3, 3))))
    return observe(seen)


def torch_lesson_script(impl):
    """The lesson's functions on tensors, a backward through ``attention`` included."""
    import torch

    torch.manual_seed(2)
    q, k, v = (torch.randn(4, 8, dtype=torch.float64) for _ in range(3))
    x = torch.randn(2, 5)
    seen = {"mask": attempt(impl.causal_mask, 4), "softmax": attempt(impl.softmax, x)}
    seen["x after softmax"] = x
    seen["attention"] = attempt(impl.attention, q, k, v, torch.ones(4, 4, dtype=torch.bool).tril())
    qg = q.clone().requires_grad_(True)
    try:
        out, w = impl.attention(qg, k, v, None)
        (out.sum() + w[0, 0]).backward()
        seen["grad"] = qg.grad
    except Exception as e:  # noqa: BLE001
        seen["grad"] = ("raised", type(e).__name__)
    X = torch.randn(2, 4, 16, dtype=torch.float64)
    W = [torch.randn(16, 8, dtype=torch.float64) for _ in range(3)]
    seen["self"] = attempt(impl.causal_self_attention, X, *W)
    return observe(seen)


@pytest.mark.filterwarnings("ignore")
def test_every_torch_lesson_row_behaves_the_same_through_the_proxy(relayed):
    pytest.importorskip("torch")
    for row in rows("lesson", "torch"):
        r = relayed(row.locator, "lesson", "torch")
        want = torch_lesson_script(_LessonDirect(direct(row)))
        assert torch_lesson_script(r.fresh()) == want, row.label
        r.close()


def _read_only(a):
    a.flags.writeable = False
    return a


def sdpa_script(f):
    """Calls an SDPA test makes, backward included; everything it can observe afterwards."""
    import torch

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8, dtype=torch.float64) for _ in range(3))
    seen = {"plain": attempt(f, q, k, v)}
    seen["q after"] = q.clone()
    out = seen["plain"]
    seen["plain is q"] = out is q
    seen["again"] = attempt(f, q, k, v)  # the same objects: an identity cache hits
    q.mul_(2.0)  # written in place, then passed again
    seen["after q changed"] = attempt(f, q, k, v)
    seen["plain afterwards"] = out.clone() if isinstance(out, torch.Tensor) else out
    seen["causal"] = attempt(f, q, k, v, is_causal=True)
    mask = torch.rand(5, 5) > 0.3
    seen["bool mask"] = attempt(f, q, k, v, attn_mask=mask)
    seen["mask after"] = mask.clone()
    seen["float32"] = attempt(f, q.float(), k.float(), v.float(), scale=0.5)
    seen["transposed k"] = attempt(f, q, k.transpose(-1, -2).contiguous().transpose(-1, -2), v)
    seen["dropout"] = attempt(f, q, k, v, dropout_p=0.5)
    seen["rng after"] = torch.rand(3)
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
    bias = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    try:
        o = f(qg, kg, vg, attn_mask=bias)
        (o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape)).sum().backward()
        seen["grads"] = [t.grad for t in (qg, kg, vg, bias)]
        seen["out with grad"] = o.detach()
    except Exception as e:  # noqa: BLE001
        seen["grads"] = ("raised", type(e).__name__)
    return observe(seen)


def direct(row):
    return renewed(load(row.locator))


@pytest.mark.filterwarnings("ignore")
def test_every_lesson_row_behaves_the_same_through_the_proxy(relayed):
    for row in rows("lesson"):
        r = relayed(row.locator, "lesson", "numpy")
        want = lesson_script(_LessonDirect(direct(row)))
        assert lesson_script(r.fresh()) == want, row.label
        r.close()


class _LessonDirect:
    def __init__(self, obj):
        self.obj = obj

    def __getattr__(self, name):
        fn = getattr(self.obj, name, None)
        if fn is None:
            raise AttributeError(name)
        return fn


@pytest.mark.filterwarnings("ignore")
def test_every_sdpa_row_behaves_the_same_through_the_proxy_backward_included(relayed):
    pytest.importorskip("torch")
    for row in rows("sdpa"):
        r = relayed(row.locator, "sdpa", "sdpa")
        want = sdpa_script(direct(row))
        assert sdpa_script(r.fresh()) == want, row.label
        r.close()


def test_a_bug_that_writes_into_its_input_writes_into_the_tests_array(relayed):
    """The relay is not idle: the bug's write reaches the caller, as a direct call's does."""
    r = relayed("zoo.softmax_in_place:NUMPY", "lesson", "numpy")
    x = np.array([[1.0, 2.0, 3.0]])
    answer = r.fresh().softmax(x)
    assert not np.array_equal(x, [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(answer.sum(), 1.0)


def test_backward_through_the_proxy_is_the_implementations_own(relayed):
    """A backward bug's gradient arrives as the bug computes it, not as autograd would."""
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(1, 1, 3, 4, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    grads = {}
    for locator in ("reference.sdpa:scaled_dot_product_attention",
                    "zoo.backward_missing_scale:SDPA"):
        f = relayed(locator, "sdpa", "sdpa").fresh()
        for t in (q, k, v):
            t.grad = None
        f(q, k, v).sum().backward()
        grads[locator] = [t.grad.clone() for t in (q, k, v)]
        assert all(g.dtype == torch.float64 and g.shape == (1, 1, 3, 4)
                   for g in grads[locator])
    ref, bug = grads.values()
    assert not torch.allclose(ref[0], bug[0])  # the bug's dQ is off by the scale


# -- exceptions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ValueError", "RuntimeError", "TypeError", "AssertionError",
                                  "IndexError", "ZeroDivisionError", "custom", "axis",
                                  "exit"])
def test_an_exception_of_the_implementation_reaches_the_test_as_its_type(relayed, kind):
    r = relayed(f"{IMPLS / 'raises.py'}:sdpa", "sdpa", "sdpa")
    f = r.fresh()
    want = {"custom": ValueError, "axis": np.exceptions.AxisError, "exit": SystemExit}.get(
        kind) or getattr(builtins, kind)
    with pytest.raises(want) as info:
        f(np.zeros(2), kind)
    assert type(info.value).__module__ in ("builtins", "numpy.exceptions")
    text = str(info.value)
    assert "\x1b" not in text and "\\x1b[2J" in text or kind in ("axis", "exit")
    assert f(np.ones(2), "none").tolist() == [1.0, 1.0]  # the worker goes on after it


def test_an_exception_class_of_the_implementations_own_never_leaves_its_worker():
    """What the worker sends of an exception names only builtin, NumPy or torch classes: a
    test reading the raw reply learns no module of the implementation's."""

    class Mine(ValueError):
        pass

    sent = json.dumps(relay.raised(Mine("\x1b[2J")))
    assert "Mine" not in sent and __name__ not in sent and "\x1b[2J" not in sent
    assert type(relay.rebuilt(json.loads(sent))) is ValueError


def test_a_function_asked_for_by_name_that_is_missing_is_worded_by_attnzoo(relayed):
    r = relayed(str(IMPLS / "only_softmax.py"), "lesson", "numpy")
    r.fresh()
    with pytest.raises(AttributeError, match="has no attention$"):
        r.connection.call("attention", (1, 2, 3), {})


def test_an_argument_that_cannot_travel_is_a_type_error_here(relayed):
    f = relayed(f"{IMPLS / 'raises.py'}:sdpa", "sdpa", "sdpa").fresh()
    with pytest.raises(TypeError, match="cannot be relayed"):
        f(object(), "none")


def test_warnings_of_the_implementation_reach_the_test(relayed):
    f = relayed(f"{IMPLS / 'raises.py'}:sdpa", "sdpa", "sdpa").fresh()
    with pytest.warns(RuntimeWarning, match="careful"):
        f(np.zeros(1), "warn")


# -- nothing identifying -------------------------------------------------------------------------


def reachable(obj, limit=5000):
    """Every object reachable from ``obj`` through gc.get_referents, modules and classes not
    entered (they are the same for every row)."""
    seen, todo, out = set(), [obj], []
    while todo and len(out) < limit:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        out.append(x)
        if isinstance(x, (type, type(os))):
            continue
        todo.extend(gc.get_referents(x))
    return out


def identity_text(obj):
    """What a test can read of an object without calling it."""
    parts = [repr(obj), type(obj).__module__, type(obj).__qualname__]
    for thing in reachable(obj):
        if isinstance(thing, str):
            parts.append(thing)
        elif isinstance(thing, type):
            parts += [thing.__module__, thing.__qualname__]
        elif inspect.isfunction(thing) or inspect.ismethod(thing):
            parts.append(thing.__code__.co_filename)
    for attr in ("__wrapped__", "__closure__", "__self__", "__func__", "_obj", "__module__"):
        parts.append(repr(getattr(obj, attr, None)))
    try:
        parts.append(inspect.getsourcefile(type(obj)) or "")
    except TypeError:
        pass
    return "\n".join(parts)


def names_a_bug(text):
    ids = [e.id for e in zoo.BUGS + zoo.DECOYS]
    return "# BUG" in text or "/zoo/" in text or any(
        i in text or i.replace("-", "_") in text for i in ids)


def test_the_probe_finds_the_bug_in_what_was_handed_before():
    """The identity probe can fail: on the implementation itself it names the bug."""
    assert names_a_bug(identity_text(renewed(load("zoo.mask_fill_zero:NUMPY"))))


def test_the_proxy_names_no_implementation(relayed):
    """Every row's proxy is of the same class, module and repr, and nothing reachable from it
    names a bug, a decoy or a zoo file."""
    seen = set()
    for row in rows("lesson")[:6] + rows("sdpa")[:4]:
        contract = "sdpa" if row.backend == "sdpa" else "lesson"
        handed = relayed(row.locator, contract, row.backend).fresh()
        assert not names_a_bug(identity_text(handed)), row.label
        if contract == "lesson":
            assert not names_a_bug(identity_text(handed.softmax)), row.label
        seen.add((type(handed), repr(handed)))
        for attr in ("__wrapped__", "__self__", "__func__", "_obj", "__closure__", "__dict__"):
            assert not hasattr(handed, attr) or attr == "__closure__", (row.label, attr)
    assert len(seen) == 2  # one Lesson, one Callable: the same for every row


def test_the_relay_worker_cannot_be_read(relayed):
    """The implementation's worker is not dumpable: its memory, maps and environment are not
    a test's to read (root owns them)."""
    if os.geteuid() == 0:
        pytest.skip("root reads any process's memory; identifies.py checks it from a graded "
                    "run, which Landlock's scope keeps out")
    r = relayed("zoo.mask_fill_zero:NUMPY", "lesson", "numpy")
    pid = r.worker.proc.pid
    for name in ("environ", "maps", "mem"):
        with pytest.raises(PermissionError):
            open(f"/proc/{pid}/{name}", "rb").read(1)


# -- whole grades of hostile suites ----------------------------------------------------------


PICK = {"reference", "einsum", "mask-fill-zero", "causal-upper-triangle", "no-scaling",
        "softmax-in-place"}


def picked(row):
    return row.id in PICK


def cells(doc):
    return {(r["row"], t.split("::")[1]): (c["cell"], c["outcome"]) for r in doc["rows"]
            for t, c in r["cells"].items()}


def test_a_suite_that_identifies_the_implementation_catches_nothing_by_it():
    """Every way a test could learn which implementation it was given (argv, its command line,
    every process's command line and environment, the environment, the fixture's class,
    module, attributes, closure, source and referents, the plugin's spec): each test fails
    only if it found a bug's name, and catches nothing; the honest test still catches."""
    doc = model.grade(Suite(SUITES / "identifies.py"), select=picked)
    assert doc["summary"]["false_alarms"] == 0, doc["false_alarms"]
    by_test = {t.split("::")[1]: info["catches"] for t, info in doc["tests"].items()}
    honest = by_test.pop("test_honest_weights_sum_to_one")
    assert honest, "the honest test should catch a bug"
    assert by_test and all(c == [] for c in by_test.values()), by_test


def test_an_honest_suite_grades_the_same_through_the_proxy_as_calling_it_directly():
    """The SDPA suite (backward included) graded through the proxy equals its test functions
    called directly on each implementation."""
    pytest.importorskip("torch")
    import importlib.util

    path = SUITES / "sdpa_suite.py"
    spec = importlib.util.spec_from_file_location("sdpa_suite_direct", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = {n: f for n, f in vars(module).items() if n.startswith("test_")}
    doc = model.grade(Suite(path), backend="torch", select=stateful)
    have = {r["row"]: {t.split("::")[1]: c["cell"] in ("hit", "crash", "false")
                       for t, c in r["cells"].items()} for r in doc["rows"]}
    want = {}
    for row in filter(stateful, rows("sdpa")):
        want[row.label] = {}
        for name, fn in tests.items():
            try:
                fn(direct(row))
                want[row.label][name] = False
            except Exception:  # noqa: BLE001 - any failure is a catch
                want[row.label][name] = True
    assert have == want
    assert doc["summary"]["caught"] > 0 and doc["summary"]["false_alarms"] == 0


STATEFUL = ("backward", "dropout", "memoised", "cached", "buffer", "in_place", "into",
            "gradient", "scaled_in", "clamped")


def stateful(row):
    """The correct rows, and the bugs whose effect a relay could lose: gradients, randomness,
    state kept between calls, writes into the caller's objects."""
    return row.kind != "bug" or any(w in row.id.replace("-", "_") for w in STATEFUL)


def _children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != b"Z":
                out.append(int(name))
    return out


def test_a_test_that_kills_its_neighbours_is_a_verdict_on_itself_alone():
    """Tests that signal their parent (the worker server), every process they can find, or
    close their connection to the implementation: each changes its own verdict only; every
    neighbour passes on the correct rows, the other rows' runs are untouched, and nothing of
    the grade is left running."""
    if not _scope_available():
        pytest.skip("this kernel cannot scope a graded run (Landlock ABI 6)")
    doc = model.grade(Suite(SUITES / "kills.py"), select=picked, jobs=2)
    alarms = {(a["test"].split("::")[1], a["implementation"]) for a in doc["false_alarms"]}
    correct = [r["row"] for r in doc["rows"] if r["kind"] != "bug"]
    canaries = {a[1] for a in alarms if a[1].startswith("canary-")}
    assert {a[0] for a in alarms} == {"test_signals_its_parent", "test_closes_its_connection"}, \
        [(a["test"], a["implementation"], a["outcome"], a["text"][-800:])
         for a in doc["false_alarms"]]
    assert alarms == {(t, r) for t in ("test_signals_its_parent", "test_closes_its_connection")
                      for r in correct + sorted(canaries)}
    got = cells(doc)
    for row in correct:
        assert got[(row, "test_signals_its_parent")] == ("false", "failed")
        assert got[(row, "test_closes_its_connection")] == ("false", "died")
        for t in ("test_signals_everything_it_finds", "test_neighbour_before",
                  "test_ptraces_its_parents", "test_neighbour_after"):
            assert got[(row, t)] == ("pass", "passed"), (row, t)
    server = zygote.server_pid()
    assert server is not None, "the worker server was killed"
    until = time.monotonic() + 5
    while _children_of(server) and time.monotonic() < until:
        time.sleep(0.05)
    assert _children_of(server) == [] and not hygiene._live  # noqa: SLF001


def _scope_available():
    from attnzoo.sandbox import confine

    return confine.landlock_abi() >= confine.LANDLOCK_NEEDED


def test_exceptions_through_the_proxy_keep_their_types_in_a_graded_run():
    doc = model.grade(Suite(SUITES / "exceptions.py"), select=lambda r: r.id == "reference")
    (row,) = doc["rows"]
    got = {t.split("::")[1]: (c["outcome"], c["exception"]) for t, c in row["cells"].items()}
    assert got == {"test_value_error_of_a_negative_size": ("passed", ""),
                   "test_shape_mismatch_is_a_value_error": ("passed", ""),
                   "test_an_object_cannot_travel": ("passed", ""),
                   "test_an_unexpected_error_is_reported_as_its_type": ("failed", "ValueError")}


def test_the_graded_process_names_nothing_in_argv_cmdline_or_environment(tmp_path):
    """What a graded test reads of its own process: argv, /proc/self/cmdline and os.environ
    are the same for every row and name no row, zoo path or bug."""
    out = tmp_path / "seen.jsonl"
    suite = tmp_path / "test_self.py"
    suite.write_text(
        "import json, os, sys\n\n\ndef test_self(attention):\n"
        "    with open('/proc/self/cmdline', 'rb') as f:\n"
        "        cmdline = f.read().decode(errors='replace')\n"
        f"    with open({str(out)!r}, 'a') as f:\n"
        "        f.write(json.dumps([sys.argv, cmdline, dict(os.environ)]) + '\\n')\n")
    doc = model.grade(Suite(suite), select=picked)
    assert doc["summary"]["false_alarms"] == 0
    # the same but for the name of each run's temporary folder (random, not the row's)
    seen = [json.loads(re.sub(r"attnzoo-grade-\w+", "attnzoo-grade-X", line))
            for line in out.read_text().splitlines()]
    assert len(seen) == len(doc["rows"]) + doc["summary"]["canaries"]
    assert all(s == seen[0] for s in seen), "argv, cmdline or environ differ between rows"
    assert not names_a_bug(json.dumps(seen[0]).replace("attnzoo", ""))


def test_spec_and_connection_reach_a_run_only_by_inherited_descriptors(tmp_path):
    """The run's command line carries no spec file and no locator; the plugin's spec holds no
    locator or canary flag."""
    command = Suite(SUITES / "known_suite.py").command(tmp_path, ["t.py::test_a"])
    joined = " ".join(command).replace("attnzoo", "")
    assert not any(a.startswith("--attnzoo-grade") for a in command)
    assert "zoo" not in joined and ".spec" not in joined and "canary" not in joined
    import attnzoo.grade.fixtures as fixtures

    assert not hasattr(fixtures, "OPTION")
    assert math.isfinite(runner.START_SECONDS)


def test_a_relay_worker_ends_with_its_connection(relayed):
    """Nothing of the implementation survives the proxy's socket."""
    r = relayed("reference.lesson_numpy", "lesson", "numpy")
    r.fresh()
    pid = r.worker.proc.pid
    r.connection._sock.close()  # noqa: SLF001
    until = time.monotonic() + 5
    while r.worker.proc.poll() is None and time.monotonic() < until:
        time.sleep(0.02)
    assert r.worker.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_where_the_kernel_cannot_scope_a_run_the_grade_says_so(monkeypatch):
    """No Landlock: the runs go on unscoped, and runner.unscoped() gives the one line's reason
    (which `attnzoo grade` prints on stderr and puts in its JSON)."""
    zygote.stop()
    monkeypatch.setattr(zygote, "PRELOAD", zygote.PRELOAD + ["tests.targets.grade.impl.old_kernel"])
    monkeypatch.setattr(runner, "_unscoped", {})
    try:
        doc = model.grade(Suite(SUITES / "known_suite.py"), select=lambda r: r.id == "reference")
        assert doc["summary"]["false_alarms"] == 0
        assert "no Landlock" in (runner.unscoped() or "")
    finally:
        zygote.stop()  # the next server starts without the patch
