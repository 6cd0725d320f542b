"""A callable or a source string as a module of its own, for ``attnzoo.check()`` (attnzoo.api).

The worker imports code under test from a file; the caller's process never runs it. So a
function is carried by its source (``inspect.getsource``, which reads a notebook cell through
linecache), with what its code looks up in its module's namespace: modules become imports,
functions and classes of the same namespace their own source, objects of an importable module
a ``from … import``, plain constants their literal. Anything else is refused with a line that
says to save the code to a file: a module that imported but misbehaved would be a false verdict.

Nothing here calls the function or evaluates its code: the source is read and parsed only.
"""

import __future__

import ast
import dis
import inspect
import math
import os
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnzoo.options import BadInput

HEADER = "# Written by attnzoo.check()"
LESSON_FUNCTIONS = ("causal_mask", "softmax", "attention", "causal_self_attention")
LITERALS = (type(None), bool, int, str, bytes)  # exact types: an IntEnum's repr is no literal
FUTURE_ANNOTATIONS = __future__.annotations.compiler_flag
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Module:
    """What to write: the module's text, the attribute to check (None: the module, for the
    lesson contract), what the report calls it and the file's stem."""

    text: str
    function: str | None
    display: str
    stem: str


def is_source(text: str) -> bool:
    """Whether a string is Python code rather than a locator: it spans lines, or it defines or
    imports something (a locator such as ``pkg.mod:func`` parses, but as an annotation)."""
    if "\n" in text:
        return True
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, DEFINITIONS + (ast.Import, ast.ImportFrom)) for n in tree.body)


def from_source(text: str, contract: str, name: str | None = None) -> Module:
    """A source string as the module to check: under the sdpa contract the top-level function
    ``name``, or the last top-level ``def`` when no name is given (helpers come first)."""
    text = textwrap.dedent(text)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise BadInput(f"the source does not parse: line {e.lineno}: {e.msg}: fix the code") \
            from None
    if contract == "lesson":
        if name is not None:
            raise BadInput("name= picks the SDPA callable of a source; a lesson-contract source "
                           "is checked as a module (causal_mask, softmax, attention, "
                           "causal_self_attention): drop name=")
        return Module(f"{HEADER} from a source string.\n{text}", None, "<source>",
                      "lesson_source")
    defs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if name is None:
        if not defs:
            raise BadInput("the source defines no top-level function: define one with def, or "
                           "name the callable to check with name=")
        name = defs[-1]
    elif name not in top_level_names(tree):
        shown = ", ".join(sorted(top_level_names(tree))) or "nothing"
        raise BadInput(f"the source defines no top-level {name!r} (it defines {shown}): "
                       "name one of its functions with name=")
    return Module(f"{HEADER} from a source string.\n{text}", name, name, stem(name, tree))


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module's top-level statements bind."""
    names = set()
    for node in tree.body:
        if isinstance(node, DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def from_callable(fn: Callable[..., Any], contract: str) -> Module:
    """A function as the module to check: its source, and what it uses of its namespace."""
    label = getattr(fn, "__qualname__", None) or type(fn).__name__
    if inspect.ismethod(fn):
        raise BadInput(f"{label} is a bound method: pass a plain function, or save the code to a "
                       "file and pass 'file.py:object'")
    inner = inspect.unwrap(fn)
    if not inspect.isfunction(inner):
        module = getattr(fn, "__module__", None)
        hint = f", or pass its locator '{module}:{label}'" \
            if module and module != "__main__" and hasattr(fn, "__qualname__") else ""
        raise BadInput(f"{label} is a {type(fn).__name__}, not a Python function whose source "
                       f"attnzoo can read: save it to a file and pass 'file.py:name'{hint}")
    if inner.__name__ == "<lambda>":
        raise BadInput("a lambda has no name to check it by: define the function with def")
    if inner.__closure__:
        raise BadInput(f"{label} closes over {', '.join(inner.__code__.co_freevars)} of the "
                       "function that defines it, which its module would not have: define it at "
                       "the top level, or save it to a file and pass 'file.py:name'")
    module = inner.__module__
    display = label if module in (None, "__main__", "builtins") else f"{module}.{label}"
    text = Carrier(inner, display).module()
    if contract == "lesson" and inner.__name__ not in LESSON_FUNCTIONS:
        text += f"\nattention = {inner.__name__}  # checked as the lesson's attention\n"
    return Module(text, inner.__name__, display, stem(inner.__name__, ast.parse(text)))


def stem(name: str, tree: ast.Module) -> str:
    """The file's name: the function's, unless a module the code imports would be shadowed
    (the worker puts the file's folder first on sys.path while it imports it)."""
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    taken = imported | set(sys.stdlib_module_names) | {"torch", "numpy"}
    return f"{name}_checked" if name in taken else name


def write(module: Module, folder: str) -> str:
    """Write the module into ``folder``; its path. A file there that attnzoo did not write is
    never overwritten (``repro_dir`` may be a folder of the user's)."""
    path = os.path.join(folder, module.stem + ".py")
    if os.path.lexists(path):
        try:
            with open(path, encoding="utf-8") as f:
                ours = f.readline().startswith(HEADER)
        except (OSError, UnicodeDecodeError):
            ours = False
        if not ours:
            raise BadInput(f"{path} exists and attnzoo did not write it: choose another "
                           "repro_dir")
    with open(path, "w", encoding="utf-8") as f:
        f.write(module.text)
    return path


class Carrier:
    """Collects a function's source and everything it looks up in its namespace."""

    def __init__(self, fn, display):
        self.fn, self.display, self.namespace = fn, display, fn.__globals__
        self.imports, self.values, self.aliases = [], [], []
        self.sources = []  # (name, text) in the order found: the function first
        self.seen = {fn.__name__}

    def module(self):
        todo = [self.fn]
        while todo:
            obj = todo.pop(0)
            text, names = self.read(obj)
            self.sources.append(text)
            for name in sorted(names - self.seen):
                if name in self.namespace:
                    self.seen.add(name)
                    todo += self.carry(name, self.namespace[name])
        future = "from __future__ import annotations\n" \
            if self.fn.__code__.co_flags & FUTURE_ANNOTATIONS else ""
        parts = [f"{HEADER} from {self.display}: its source and what it uses of its module.\n"
                 + future, "\n".join(dict.fromkeys(self.imports)), "\n".join(self.values),
                 *reversed(self.sources), "\n".join(self.aliases)]  # what is used comes first
        return "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"

    def read(self, obj):
        """(source, the global names it uses): a function's from its bytecode, plus what its
        def line evaluates; a class's, every name it mentions."""
        label = getattr(obj, "__qualname__", repr(obj))
        try:
            text = textwrap.dedent(inspect.getsource(obj))
            node = ast.parse(text).body[0]
        except (OSError, TypeError, SyntaxError, IndexError):
            where = getattr(getattr(obj, "__code__", None), "co_filename", None)
            raise BadInput(f"cannot read the source of {label}"
                           + (f" (defined in {where})" if where else "")
                           + ": attnzoo runs the code in a worker process from its source; save "
                           f"it to a file and pass 'file.py:{getattr(obj, '__name__', 'name')}'"
                           ) from None
        if not isinstance(node, DEFINITIONS) or node.name != obj.__name__:
            raise BadInput(f"the source of {label} is not its def statement: define it with "
                           "def, or save it to a file and pass 'file.py:name'")
        if isinstance(node, ast.ClassDef):
            return text, {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        evaluated = [*node.decorator_list, *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None),
                     *(a.annotation for a in ast.walk(node.args)
                       if isinstance(a, ast.arg) and a.annotation is not None),
                     *([node.returns] if node.returns else [])]
        return text, globals_of(obj.__code__) | {
            n.id for e in evaluated for n in ast.walk(e) if isinstance(n, ast.Name)}

    def carry(self, name, value):
        """Record how ``name`` gets ``value`` in the module; what else to read the source of."""
        if inspect.ismodule(value) and value.__name__ != "__main__":
            self.imports.append(f"import {value.__name__}" if name == value.__name__
                                else f"import {value.__name__} as {name}")
            return []
        if self.defined_here(value):
            if name != value.__name__:
                self.aliases.append(f"{name} = {value.__name__}")
            if value.__name__ in self.seen and name != value.__name__:
                return []
            self.seen.add(value.__name__)
            return [inspect.unwrap(value)]
        if literal(value) is not None:
            self.values.append(f"{name} = {literal(value)}")
            return []
        if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
            self.imports.append("import torch")
            self.values.append(f"{name} = {value}")  # torch.float32
            return []
        found = importable(value)
        if found:
            module, qualname = found
            self.imports.append(f"from {module} import {qualname}"
                                + (f" as {name}" if name != qualname else ""))
            return []
        raise BadInput(f"{self.display} uses the global {name!r}, a {type(value).__name__} "
                       "that attnzoo cannot carry to its worker process: define it inside the "
                       "function, or save the code to a file and pass 'file.py:name'")

    def defined_here(self, value):
        """A function or class of the checked function's own namespace (a notebook's, a test
        module's): carried by its source, since that namespace may not be importable."""
        inner = inspect.unwrap(value) if callable(value) else value
        if inspect.isfunction(inner):
            return inner.__globals__ is self.namespace
        return inspect.isclass(value) and value.__module__ == self.namespace.get("__name__")


def globals_of(code):
    """The global names a code object and those nested in it load."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= globals_of(const)
    return names


def importable(value):
    """(module, name) from which the worker can import ``value`` itself, or None."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "." in qualname \
            or module == "__main__" or module not in sys.modules:
        return None
    return (module, qualname) if getattr(sys.modules[module], qualname, None) is value else None


def literal(value: object) -> str | None:
    """Python source that evaluates to ``value``, for plain constants and containers of them;
    None for anything else."""
    kind = type(value)
    if kind in LITERALS:
        return repr(value)
    if kind is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if kind in (tuple, list, set, frozenset):
        items = [literal(v) for v in value]
        if any(i is None for i in items):
            return None
        inner = ", ".join(items)
        if kind is tuple:
            return f"({inner}{',' if len(items) == 1 else ''})"
        if kind is list:
            return f"[{inner}]"
        return (f"{{{inner}}}" if items else "set()") if kind is set else f"frozenset({{{inner}}})"
    if kind is dict:
        pairs = [(literal(k), literal(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return None
