"""The buggy lines of a zoo entry as a unified diff against the correct method it replaces.

The base is the nearest correct class the entry derives from: a reference class, or a decoy
(a correct tiled or split-KV kernel that the entry breaks in one method).
"""

import difflib
import inspect
import textwrap

CORRECT_MODULES = ("reference.", "zoo.decoys.", "zoo.varlen.decoys.")


def _reference_base(cls):
    for base in cls.__mro__[1:]:
        if base.__module__.startswith(CORRECT_MODULES):
            return base
    return None


def method_diffs(obj):
    """(label, diff text) for every method the implementation's class defines itself."""
    cls = obj if inspect.isclass(obj) else type(obj)
    base = _reference_base(cls)
    if base is None:
        return []
    out = []
    for name, member in cls.__dict__.items():
        if not inspect.isfunction(member):
            continue
        new = textwrap.dedent(inspect.getsource(member)).splitlines()
        old_member = getattr(base, name, None)
        old = textwrap.dedent(inspect.getsource(old_member)).splitlines() if old_member else []
        where_old = f"{base.__module__.replace('.', '/')}.py {base.__name__}.{name}"
        where_new = f"{cls.__module__.replace('.', '/')}.py {cls.__name__}.{name}"
        diff = difflib.unified_diff(old, new, where_old, where_new, lineterm="", n=2)
        out.append((f"{cls.__name__}.{name}", "\n".join(diff)))
    return out


def entry_diff(entry):
    """Every backend's diff, or a note where an implementation is not a reference subclass."""
    parts = []
    for backend in entry.backends:
        obj = entry.implementation(backend)
        diffs = method_diffs(obj)
        if not diffs:
            parts.append(f"[{backend}] {type(obj).__name__}: written from scratch "
                         "(no reference method to diff against)")
            continue
        for label, text in diffs:
            parts.append(f"[{backend}] {label}\n{text}")
    return "\n\n".join(parts)
