"""What is under test, where it lives, and which conventions it declares.

A target is named by a locator, the same string the command line takes:
``path/to/module.py`` (a lesson-style module), ``path/to/file.py:func`` or
``package.module:func`` (an SDPA-style callable, or any attribute holding a lesson module).
"""

import errno
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, replace

LESSON_FUNCTIONS = ("causal_mask", "softmax", "attention", "causal_self_attention")
LESSON_ARITY = {"causal_mask": 1, "softmax": 1, "attention": 4, "causal_self_attention": 4}
LESSON_SIGNATURE = {
    "causal_mask": "causal_mask(T)",
    "softmax": "softmax(x)",
    "attention": "attention(Q, K, V, mask=None)",
    "causal_self_attention": "causal_self_attention(X, W_q, W_k, W_v)",
}
ZOO_ATTRIBUTES = {"numpy": "NUMPY", "torch": "TORCH", "sdpa": "SDPA"}  # a zoo file's rows
SDPA_KEYWORDS = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
SDPA_SIGNATURE = (
    "f(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, "
    "enable_gqa=False)"
)


class BadTarget(Exception):
    """The target cannot be tested at all: one line saying what is wrong and what to do."""


@dataclass(frozen=True)
class Target:
    name: str  # shown in reports: "mask-fill-zero/numpy"
    locator: str  # how to load it: "zoo.mask_fill_zero:NUMPY", "my.py", "my.py:attn"
    contract: str = "lesson"  # "lesson" or "sdpa"
    backend: str = "numpy"  # "numpy" or "torch"
    mask_convention: str = "keep"  # "keep": True = may attend; "drop": True = masked
    causal_alignment: str = "top-left"  # or "bottom-right"
    device: str = "cpu"
    empty_rows: str = "zero"  # a row with no allowed key: "zero", or "uniform" (1/S, mean of V)
    unsupported: tuple = ()  # capabilities declared on the command line (--unsupported)
    refuses: tuple = ()  # messages of a run-time refusal, as the caller names them

    @property
    def row(self):
        """The matrix row label's backend part: numpy, torch or sdpa."""
        return "sdpa" if self.contract == "sdpa" else self.backend

    def on(self, device):
        return replace(self, device=device)


@dataclass
class Manifest:
    """What a loaded target offers: the functions it has, the keywords it takes."""

    functions: dict  # name -> None when usable, else the reason it is not
    keywords: tuple = ()  # SDPA keywords the callable accepts
    unsupported: tuple = ()  # ATTNZOO_UNSUPPORTED declared beside the callable
    refuses: tuple = ()  # ATTNZOO_REFUSES: messages with which it refuses a call
    empty_rows: str | None = None  # ATTNZOO_EMPTY_ROWS declared beside the callable, if any

    def lacks(self, fn):
        return self.functions.get(fn, f"the target has no {fn}")


def renewed(obj):
    """A new instance of a callable object's class, so no state carries over between runs; a
    module, or an object that cannot be rebuilt from nothing, as it is."""
    if inspect.ismodule(obj):
        return obj
    try:
        return type(obj)()
    except TypeError:
        return obj


def load(locator):
    """Import what a locator names; raise BadTarget with a one-line fix on failure."""
    path, _, attr = _split(locator)
    if is_file(path):
        module = _load_file(path)
    else:
        module = _import(path)
    if not attr:
        return module
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BadTarget(f"{path} has no attribute {part!r}: name a function it defines")
        obj = getattr(obj, part)
    return obj


def _split(locator):
    """(path, ":", attribute) or (path, "", ""): split at the last colon only when what follows
    it is a dotted name, and never inside a path that exists (``a:b/my.py`` is a file)."""
    if not locator or not locator.strip():
        raise BadTarget("empty target: give path/to/module.py, file.py:func or package.module:func")
    path, sep, attr = locator.rpartition(":") if ":" in locator else (locator, "", "")
    if sep and (os.path.lexists(locator) or (attr and not _dotted(attr))):
        return locator, "", ""
    if sep and (not path or not attr):
        raise BadTarget(f"bad target {locator!r}: write it as file.py:func or package.module:func")
    return path, sep, attr


def _dotted(name):
    return all(part.isidentifier() for part in name.split("."))


def is_file(path):
    """Whether a locator's module part names a file (or should): not a dotted module name."""
    return path.endswith(".py") or os.sep in path or os.path.lexists(path) \
        or not _dotted(path)


def check_file(path):
    """Raise BadTarget unless ``path`` is a readable .py file, naming what is wrong with it."""
    if not os.path.lexists(path):
        raise BadTarget(f"no such file: {path}: check the path")
    try:
        os.stat(path)
    except OSError as e:
        why = "a symlink loop" if e.errno == errno.ELOOP else \
            "a broken symlink" if os.path.islink(path) else e.strerror
        raise BadTarget(f"{path} cannot be opened ({why}): point at a real .py file") from None
    if os.path.isdir(path):
        raise BadTarget(f"{path} is not a .py file but a folder: point at a Python module")
    if not path.endswith(".py"):
        raise BadTarget(f"{path} is not a .py file: point at a Python module (a .py file)")
    if not os.access(path, os.R_OK):
        raise BadTarget(f"{path} is not readable: check its permissions")


def _load_file(path):
    check_file(path)
    name = "attnzoo_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)  # let the module import its siblings
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise BadTarget(f"{path}:{e.lineno}: syntax error: {e.msg}: fix the module") from None
    except BaseException as e:  # noqa: BLE001 - anything the module does on import
        raise BadTarget(f"{path} failed to import: {_one_line(e)}: fix the module") from None
    finally:
        sys.path.remove(folder)
    return module


def _import(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise BadTarget(f"cannot import {name}: {e}: check the name or install it") from None
    except SyntaxError as e:
        raise BadTarget(f"{e.filename}:{e.lineno}: syntax error: {e.msg}: fix the module") from None
    except BaseException as e:  # noqa: BLE001
        raise BadTarget(f"{name} failed to import: {_one_line(e)}: fix the module") from None


def _one_line(exc):
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def describe(obj, locator="the target"):
    """What a loaded locator is: a zoo file, a lesson-style module or object, or a callable."""
    meta = getattr(obj, "BUG", None) or getattr(obj, "DECOY", None)
    if inspect.ismodule(obj) and meta is not None:
        found = {b: a for b, a in ZOO_ATTRIBUTES.items() if hasattr(obj, a)}
        return {"kind": "zoo", "id": str(getattr(meta, "id", "?")), "implementations": found}
    lesson = [fn for fn in LESSON_FUNCTIONS if callable(getattr(obj, fn, None))]
    if inspect.ismodule(obj):
        return {"kind": "lesson", "functions": lesson}
    if callable(obj):  # a function, or an object with __call__: the SDPA signature
        return {"kind": "callable"}
    if lesson:  # an object holding the lesson's functions as attributes
        return {"kind": "lesson", "functions": lesson}
    raise BadTarget(f"{locator} is of type {type(obj).__name__}, neither a module nor callable: "
                    "name a function as file.py:func")


def infer_backend(module):
    """'numpy' or 'torch': what the module's own functions return for a NumPy input.

    A behavioural probe, not a reading of the source: causal_mask(2) (or softmax of a small
    array) is called once; a torch.Tensor answer, or an error where torch tensors work, means
    the module speaks torch. None when the probe cannot tell.
    """
    import numpy as np  # only when a backend is inferred, not on import

    probes = [("causal_mask", lambda: (2,)), ("softmax", lambda: (np.array([[0.0, 1.0]]),))]
    for name, args in probes:
        fn = getattr(module, name, None)
        if not callable(fn):
            continue
        answered = _type_of(fn, args())
        if answered == "ndarray":
            return "numpy"
        if answered == "Tensor":
            return "torch"
        if answered == "error" and name == "softmax":
            import torch  # only when numpy could not tell

            if _type_of(fn, (torch.tensor([[0.0, 1.0]]),)) == "Tensor":
                return "torch"
    return None


def _type_of(fn, args):
    try:
        return type(fn(*args)).__name__
    except Exception:  # noqa: BLE001 - a probe; whatever the function does is an answer
        return "error"

