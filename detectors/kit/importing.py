"""The lines that import the code under test as ``impl`` in a reproduction, without attnzoo:
``from pkg.mod import fn`` for a module, ``importlib`` on the absolute path for a file, read
as attnzoo's loader (``attnzoo.sandbox.target``) reads a locator.
"""

import importlib.machinery
import os
import sys


def imports(target):
    """The standard-library imports the lines of :func:`load` need."""
    uses = "\n".join(load(target))
    return [f"import {m}" for m in ("importlib.util", "sys") if f"{m}." in uses]


def is_file(target):
    """Whether the target is imported from a file (else by module name)."""
    return _split(target.locator)[0] is not None


def _split(locator):
    """(absolute file path or None, module name or None, attribute) of a locator, read as
    attnzoo's loader reads it (attnzoo.sandbox.target)."""
    path, _, attr = locator.rpartition(":") if ":" in locator else (locator, "", "")
    if ":" in locator and (os.path.exists(locator) or not _dotted(attr)):
        path, attr = locator, ""
    if path.endswith(".py") or os.sep in path or os.path.exists(path) or not _dotted(path):
        return os.path.abspath(path), None, attr
    return None, path, attr


def _dotted(name):
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def load(target):
    """The lines that import the code under test as ``impl``, as attnzoo's loader does."""
    path, module, attr = _split(target.locator)
    if path is not None:
        stem = os.path.splitext(os.path.basename(path))[0]
        lines = [f"spec = importlib.util.spec_from_file_location({stem!r}, {path!r})",
                 "module = importlib.util.module_from_spec(spec)",
                 "sys.modules[spec.name] = module",
                 f"sys.path.insert(0, {os.path.dirname(path)!r})  # so it can import what lies "
                 "beside it",
                 "spec.loader.exec_module(module)"]
        return lines + [f"impl = module.{attr}" if attr else "impl = module"]
    lines = []
    top = module.split(".")[0]
    here = os.getcwd()
    if not _installed(top, here) and (os.path.exists(os.path.join(here, top))
                                      or os.path.exists(os.path.join(here, top + ".py"))):
        lines.append(f"sys.path.insert(0, {here!r})  # where {top} was found")
    if not attr:
        return lines + [f"import {module} as impl"]
    head, _, rest = attr.partition(".")
    lines.append(f"from {module} import {head}" + ("" if rest else " as impl"))
    return lines + ([f"impl = {head}.{rest}"] if rest else [])


def _installed(top, here):
    """Whether the top-level module ``top`` imports from somewhere other than the working
    folder (site-packages, an editable install). Finding a top-level module's spec runs none
    of its code."""
    paths = [p for p in sys.path if p not in ("", here)]
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec(top, paths)
            else:
                spec = finder.find_spec(top, None)
        except Exception:  # a finder that cannot answer: not found through it
            spec = None
        if spec is not None:
            return True
    return False
