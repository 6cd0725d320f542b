"""Canaries: the reference, dressed as a zoo bug, graded beside the bugs.

A test could tell a bug from the reference by what the implementation *is* rather than by what it
returns: its class, its module, its source file with the ``# BUG`` line, its metadata. A canary
is a bug's own object whose every replaced method runs the reference's code again, under the
bug's names: the class, its module and file, and each method's name, file and first line (so
``inspect.getsource`` shows the bug's method) are the bug's; what it computes is correct. A test
that fails on a canary is a false alarm, and says the test looked at the implementation's name
instead of its answers.

Not covered: a test that compares code objects (bytecode) or imports the zoo to compare; both
still read behaviour-free facts, which a canary cannot imitate without being the bug.
"""

import inspect
import types

EVERY = 3  # one bug entry in this many, in catalogue order, is graded as a canary too


def chosen(rows):
    """The bug rows graded again as canaries: every EVERY-th eligible bug entry, on its first
    backend (deterministic, so a grade is reproducible; a test cannot see which at run time)."""
    from attnzoo.sandbox.target import load

    firsts, seen = [], set()
    for row in rows:
        if row.kind == "bug" and row.id not in seen:
            seen.add(row.id)
            if dressed(load(row.locator)) is not None:
                firsts.append(row)
    return firsts[::EVERY]


def dressed(impl):
    """A canary of ``impl`` (an instance of a class derived from the reference's), or None when
    it replaces no method of a reference class."""
    if inspect.ismodule(impl) or inspect.isfunction(impl):
        return None
    cls = type(impl)
    reference = next((c for c in cls.__mro__ if c.__module__.startswith("reference.")), None)
    if reference is None:
        return None
    own = {}
    for klass in cls.__mro__[:cls.__mro__.index(reference)]:
        for name, fn in vars(klass).items():
            base = inspect.getattr_static(reference, name, None)
            if name not in own and inspect.isfunction(fn) and inspect.isfunction(base):
                own[name] = _as(base, fn)
    if not own:
        return None
    canary = type(cls.__name__, (cls,), own)
    canary.__module__, canary.__qualname__, canary.__doc__ = \
        cls.__module__, cls.__qualname__, cls.__doc__
    obj = canary.__new__(canary)
    obj.__dict__.update(getattr(impl, "__dict__", {}))
    return obj


def _as(base, fn):
    """``base``'s code under ``fn``'s name, file and first line."""
    code = base.__code__.replace(co_filename=fn.__code__.co_filename, co_name=fn.__name__,
                                 co_firstlineno=fn.__code__.co_firstlineno,
                                 co_qualname=fn.__qualname__)
    names = dict(base.__globals__)  # the reference's names, under the bug module's own name
    names.update({k: v for k, v in fn.__globals__.items() if k.startswith("__")})
    out = types.FunctionType(code, names, fn.__name__, base.__defaults__, base.__closure__)
    out.__kwdefaults__, out.__doc__ = base.__kwdefaults__, fn.__doc__
    out.__qualname__, out.__module__ = fn.__qualname__, fn.__module__
    return out
