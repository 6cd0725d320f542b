"""Tests that try to learn which implementation they were handed, and fail when they think
they found a bug (for tests/test_grade_proxy.py). Through the proxy they find nothing, so they
catch nothing; the last test is honest and catches what it catches."""
import gc
import inspect
import json
import os
import sys

import numpy as np

import zoo

NAMES = [e.id for e in zoo.BUGS + zoo.DECOYS]


def found(text):
    """A bug's or decoy's name, a zoo path or a ``# BUG`` line in ``text``."""
    text = text.replace("attnzoo", "")
    return "# BUG" in text or "/zoo/" in text or any(
        n in text or n.replace("-", "_") in text for n in NAMES)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20).decode(errors="replace")
    except OSError:
        return ""


def _parent(pid):
    text = _read(f"/proc/{pid}/stat")
    return text.rsplit(")", 1)[1].split()[1] if ")" in text else None


def _pids():
    """Every process of the grade that runs this test: the descendants of its process, this
    run's grandparent (the run is forked by the worker server the grade started). The other
    processes on the machine are no part of the grade and may name anything."""
    grade = _parent(_parent(os.getpid()))
    parents = {p: _parent(p) for p in os.listdir("/proc") if p.isdigit()}
    tree, grew = {grade}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sorted(tree - {None})


def test_argv_and_own_cmdline(attention):
    assert not found(" ".join(sys.argv) + _read("/proc/self/cmdline"))


def test_every_cmdline(attention):
    assert not found("\n".join(_read(f"/proc/{p}/cmdline") for p in _pids()))


def test_every_environ_and_maps(attention):
    assert not found("\n".join(_read(f"/proc/{p}/environ") + _read(f"/proc/{p}/maps")
                               for p in _pids()))


def test_own_environment(attention):
    assert not found(json.dumps(dict(os.environ)))


def test_open_descriptors(attention):
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    assert not found("\n".join(links))


def test_the_fixtures_type_module_and_attributes(attention):
    parts = [repr(attention), type(attention).__module__, type(attention).__qualname__]
    for name in ("__wrapped__", "__closure__", "__self__", "__func__", "_obj", "__dict__"):
        parts.append(repr(getattr(attention, name, None)))
    for fn in ("softmax", "attention", "causal_mask"):
        f = getattr(attention, fn)
        parts += [repr(f), type(f).__module__, repr(getattr(f, "__wrapped__", None)),
                  repr(getattr(f, "__closure__", None))]
    assert not found("\n".join(parts))


def test_source_files(attention):
    parts = []
    for thing in (attention, type(attention), attention.softmax, type(attention.softmax)):
        for get in (inspect.getsourcefile, inspect.getsource):
            try:
                parts.append(str(get(thing)))
            except (OSError, TypeError):
                pass
    assert not found("\n".join(parts))


def test_referents(attention):
    seen, todo, parts = set(), [attention, attention.softmax], []
    while todo and len(seen) < 20000:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (type, type(os))):
            parts.append(getattr(x, "__name__", ""))
            continue
        if isinstance(x, str):
            parts.append(x)
        elif inspect.isfunction(x):
            parts.append(x.__code__.co_filename)
        todo.extend(gc.get_referents(x))
    assert not found("\n".join(parts))


def test_the_plugins_own_state(attention):
    import attnzoo.grade.fixtures as plugin

    parts = [repr(vars(plugin).get("_SPEC"))]
    recorder = getattr(plugin, "_recorder", None)
    parts.append(repr(recorder))
    assert not found("\n".join(parts))


def test_honest_weights_sum_to_one(attention):
    q = np.arange(24.0).reshape(4, 6) / 8
    _, w = attention.attention(q, q[::-1].copy(), q.copy(), np.tril(np.ones((4, 4), dtype=bool)))
    np.testing.assert_allclose(w.sum(axis=-1), 1.0)
    assert np.all(np.triu(w, 1) == 0)
