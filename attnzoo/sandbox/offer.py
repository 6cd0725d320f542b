"""What a loaded target offers, split at the socket: facts read where it lives, the
:class:`~attnzoo.sandbox.target.Manifest` decided in the parent.

:func:`facts` (the implementation's process) only reads: which lesson functions exist and are
callable, each signature's parameters (name, kind, whether it has a default) and its text, and
the raw ``ATTNZOO_UNSUPPORTED``/``ATTNZOO_REFUSES``/``ATTNZOO_EMPTY_ROWS`` values.
:func:`decide` (the parent) checks that plain data and makes every decision — whether a
signature binds the contract, which SDPA keywords are accepted, whether a declaration is valid
— so a target that patches ``inspect`` in its own process cannot decide what it is tested on.
"""

import inspect

from attnzoo.inert import inert
from attnzoo.sandbox.target import (
    LESSON_ARITY,
    LESSON_FUNCTIONS,
    LESSON_SIGNATURE,
    SDPA_KEYWORDS,
    SDPA_SIGNATURE,
    BadTarget,
    Manifest,
)
from detectors.kit.capabilities import VOCABULARY, unknown

VARLEN_MARK = "cu_seqlens_q"  # a parameter of the varlen contract's signature and of no SDPA's

DECLARATIONS = ("ATTNZOO_UNSUPPORTED", "ATTNZOO_REFUSES", "ATTNZOO_EMPTY_ROWS")
EMPTY_ROWS = ("zero", "uniform")  # attnzoo.options.EMPTY_ROWS: the conventions one may declare
TEXT = 200  # characters of a signature's text kept for messages
P = inspect.Parameter
KINDS = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.VAR_POSITIONAL, P.KEYWORD_ONLY,
         P.VAR_KEYWORD)  # by their int values, 0 to 4


# -- the implementation's side ---------------------------------------------------------------

def facts(obj, target):
    """Plain data about ``obj``: for the lesson contract one entry per function (None when
    absent), for SDPA one entry for the callable and its declarations."""
    if target.contract == "sdpa":
        module = inspect.getmodule(obj)
        declared = {n: _raw(getattr(obj, n, getattr(module, n, ()))) for n in DECLARATIONS}
        return {"sdpa": _function(obj), "declared": declared}
    return {"functions": {fn: None if getattr(obj, fn, None) is None
                          else _function(getattr(obj, fn)) for fn in LESSON_FUNCTIONS}}


def _function(f):
    if not callable(f):
        return {"callable": False}
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):  # builtins such as F.scaled_dot_product_attention
        return {"callable": True, "params": None}
    params = [{"name": p.name, "kind": KINDS.index(p.kind), "default": p.default is not p.empty}
              for p in sig.parameters.values()]
    return {"callable": True, "params": params, "text": str(sig)[:TEXT]}


def _raw(value):
    """A declaration as data: its strings, whether it was one bare string, or that it is not
    strings at all."""
    if isinstance(value, str):
        return {"strings": [value], "single": True}
    if isinstance(value, (tuple, list, frozenset, set)) and all(isinstance(v, str) for v in value):
        return {"strings": list(value), "single": False}
    return {"invalid": type(value).__name__}


# -- the parent's side -----------------------------------------------------------------------

class Malformed(ValueError):
    """What the worker sent is not facts about a target."""


def manifest(obj, target):
    """Check signatures and list what the target offers; raise BadTarget if nothing usable.
    Facts are read from the object and decided on as data, here as in the parent of a worker."""
    return decide(facts(obj, target), target)


def decide(data, target):
    """The Manifest, or BadTarget with a one-line fix; Malformed for data that is not facts."""
    if not isinstance(data, dict):
        raise Malformed("not a dict")
    if target.contract == "sdpa":
        return _sdpa(data, target)
    functions, out = data.get("functions"), {}
    if not isinstance(functions, dict) or set(functions) != set(LESSON_FUNCTIONS):
        raise Malformed("not one entry per lesson function")
    for fn in LESSON_FUNCTIONS:
        f = functions[fn]
        if f is None:
            out[fn] = f"{target.name} defines no {fn}"
            continue
        if not _entry(f)["callable"]:
            raise BadTarget(f"{target.locator}: {fn} is not callable: define it as a function")
        sig = _signature(f)
        if not _binds(sig, LESSON_ARITY[fn]):
            raise BadTarget(
                f"{target.locator}: {fn}{inert(f['text'])} does not match the contract "
                f"{LESSON_SIGNATURE[fn]}: fix its parameters"
            )
        out[fn] = None
    if all(out.values()):
        raise BadTarget(
            f"{target.locator} defines none of {', '.join(LESSON_FUNCTIONS)}: "
            "implement the lesson contract, or name a callable as file.py:func"
        )
    return Manifest(out)


def _sdpa(data, target):
    f = _entry(data.get("sdpa"))
    if not f["callable"]:
        raise BadTarget(f"{target.locator} is not callable: name a function as file.py:func")
    unsupported, refuses, empty_rows = _declared(data.get("declared"), target)
    sig = _signature(f)
    if sig is None:
        return Manifest({"sdpa": None}, SDPA_KEYWORDS, unsupported, refuses, empty_rows)
    if not _binds(sig, 3):
        if VARLEN_MARK in sig.parameters:  # flash-attention's varlen signature, by its offsets
            raise BadTarget(f"{target.locator} takes {VARLEN_MARK}, the packed varlen contract's "
                            "offsets: add --contract varlen (docs/varlen.md)")
        raise BadTarget(
            f"{target.locator}{inert(f['text'])} cannot be called as {SDPA_SIGNATURE}: fix its "
            "parameters"
        )
    var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    accepted = tuple(k for k in SDPA_KEYWORDS if var_kw or k in sig.parameters)
    return Manifest({"sdpa": None}, accepted, unsupported, refuses, empty_rows)


def _declared(declared, target):
    if not isinstance(declared, dict) or set(declared) != set(DECLARATIONS):
        raise Malformed("no declarations")
    out = []
    for name in DECLARATIONS:
        value = declared[name]
        if not isinstance(value, dict):
            raise Malformed(f"{name} is not described")
        strings = value.get("strings")
        listed = "invalid" not in value and isinstance(strings, list) \
            and all(isinstance(v, str) for v in strings)
        if name == "ATTNZOO_EMPTY_ROWS":
            out.append(_empty_rows(strings if listed else None, value.get("single"), target))
        elif not listed:
            raise BadTarget(f"{target.locator}: {name} must be a tuple of strings")
        else:
            out.append(tuple(sorted(strings)) if name == "ATTNZOO_UNSUPPORTED"
                       else tuple(inert(v) for v in strings))  # refusals are shown in the report
    bad = unknown(out[0])
    if bad is not None:
        raise BadTarget(f"{target.locator}: ATTNZOO_UNSUPPORTED names {inert(repr(bad))}, not a "
                        f"capability: use {', '.join(VOCABULARY)}")
    return tuple(out)


def _empty_rows(strings, single, target):
    """ATTNZOO_EMPTY_ROWS: one convention, as a string; None where the module declares none."""
    if strings == [] and single is False:  # absent: read as the empty tuple
        return None
    if single is not True or not strings or strings[0] not in EMPTY_ROWS:
        raise BadTarget(f"{target.locator}: ATTNZOO_EMPTY_ROWS must be one of "
                        f"{', '.join(repr(c) for c in EMPTY_ROWS)} (a string)")
    return strings[0]


def _entry(f):
    if not isinstance(f, dict) or not isinstance(f.get("callable"), bool):
        raise Malformed("a function entry without 'callable'")
    return f


def _signature(f):
    """An inspect.Signature rebuilt from the parameters sent (None: it has none to read)."""
    params = f.get("params")
    if params is None:
        return None
    if not isinstance(params, list) or not isinstance(f.get("text"), str):
        raise Malformed("parameters that are not a list")
    if not all(isinstance(p, dict) and type(p.get("kind")) is int and 0 <= p["kind"] < len(KINDS)
               and type(p.get("default")) is bool for p in params):
        raise Malformed("parameters of no kind _function sends")
    try:
        return inspect.Signature([
            inspect.Parameter(p["name"], KINDS[p["kind"]],
                              **({"default": None} if p["default"] is True else {}))
            for p in params])
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise Malformed(f"parameters that make no signature ({e})") from None


def _binds(sig, arity):
    if sig is None:
        return True
    try:
        sig.bind(*([None] * arity))
    except TypeError:
        return False
    return True
