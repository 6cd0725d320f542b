"""Tests that decide by what the implementation is, not by what it returns (for test_grade)."""
import inspect
import os
import sys


def _source_of(attention):
    """Everything a test can read about the object it was handed, without calling it."""
    obj = getattr(attention, "_obj", attention)  # the implementation itself, once
    parts = [repr(obj), type(obj).__module__]
    for thing in (type(obj), obj.attention, obj.softmax):
        try:
            parts += [inspect.getsource(thing), open(inspect.getfile(thing)).read()]
        except (OSError, TypeError):
            pass
    return "\n".join(parts)


def test_its_source_has_no_bug_line(attention):
    assert "# BUG" not in _source_of(attention)


def test_the_arguments_do_not_name_it(attention):
    with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace")
    said = " ".join(sys.argv) + cmdline
    assert "zoo" not in said.replace("attnzoo", "") and "# BUG" not in said
