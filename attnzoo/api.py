"""``attnzoo.check(...)``: the detectors as a function call, for code that generates kernels.

A pipeline that writes attention code wants a verdict it can branch on, not a subprocess and a
JSON parse. This is ``attnzoo check`` without the command line: the same options
(:class:`attnzoo.options.Options`), the same run (:func:`attnzoo.checking.run_check`), the same
document and text. The code under test still never runs in the caller's process: a callable or
a source string is written as a module (attnzoo.carry) into a private temporary folder and
checked by its file locator in attnzoo's worker, and only the report's plain data comes back.
docs/api.md.
"""

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from attnzoo.options import BadInput, Options
from attnzoo.results import Report, report

CONTRACTS = ("sdpa", "lesson", "varlen")
# the command line's spelling of an option, in a BadInput line, respelt as this API's keyword
KEYWORDS = {"--budget": "budget_s", "--deadline": "deadline_s", "--timeout": "timeout_s",
            "--import-timeout": "import_timeout_s", "--warmup": "warmup_s",
            "--repro-dir": "repro_dir",
            "--memory-limit": "memory_limit", "--scratch-limit": "scratch_limit",
            "--mask-convention": "mask_convention", "--causal-alignment": "causal_alignment",
            "--empty-rows": "empty_rows", "--window-counting": "window_counting",
            "--backend": "backend", "--dtype": "dtype",
            "--depth": "depth", "--device": "device", "--seed": "seed", "--isolation":
            "isolation", "--unsupported": "unsupported"}


def check(
    fn_or_locator: Callable[..., Any] | str | os.PathLike,
    contract: str | None = "sdpa",
    *,
    name: str | None = None,
    depth: str | None = None,
    dtype: str | None = None,
    device: str = "cpu",
    budget_s: float | None = None,
    deadline_s: float | None = None,
    exitfirst: bool = False,
    seed: int = 0,
    only: Iterable[str] | str | None = None,
    expect: str | os.PathLike | None = None,
    repro_dir: str | os.PathLike | None = None,
    isolation: str | None = None,
    backend: str | None = None,
    mask_convention: str = "keep",
    causal_alignment: str | None = None,
    empty_rows: str = "zero",
    window_counting: str | None = None,
    unsupported: Iterable[str] | str = (),
    refuses: Iterable[str] = (),
    timeout_s: float | None = None,
    import_timeout_s: float | None = None,
    warmup_s: float | None = None,
    memory_limit: int | str | None = None,
    scratch_limit: int | str | None = None,
    shrink: bool = True,
    progress: bool = False,
) -> Report:
    """Run the detectors on attention, in attnzoo's worker process; the report as objects.

    ``fn_or_locator``: a locator as ``attnzoo check`` takes (``path/to/file.py:func``,
    ``pkg.mod:func``, ``module.py``), a function (its source is read, a notebook cell's too), or
    Python source defining it (``name`` picks the function; else the last top-level ``def``).
    ``contract``: "sdpa" (F.scaled_dot_product_attention's signature, torch), "lesson" (a
    module with the lesson's functions, ``backend`` numpy or torch, inferred when None) or
    "varlen" (flash-attention's ``attn_varlen`` signature, ``attnzoo check --contract varlen``,
    docs/varlen.md); None, for a locator only, checks whatever it names as ``attnzoo check``
    does (a zoo file: each of its implementations). ``depth`` None is quick (varlen: standard,
    its command line's default); ``causal_alignment`` None is the contract's default (top-left
    for sdpa, bottom-right for varlen); ``empty_rows`` and ``window_counting`` (varlen only)
    declare a varlen kernel's conventions as ``--empty-rows`` and ``--window-counting`` do.
    ``budget_s`` is ``--budget``: the most telling cases first, stopping when it is spent
    (``report.reached`` says what it reached); ``deadline_s`` is ``--deadline`` (None: the
    depth's default, 0 none); when either runs out the report is partial and
    ``exit_code`` 4 unless something was flagged. ``exitfirst`` stops at the first flag.
    ``progress`` writes the command line's progress lines on stderr. The other keywords are
    ``attnzoo check``'s options (docs/check.md). Bad input raises :class:`BadInput`, one line.
    """
    if contract not in CONTRACTS + (None,):
        raise BadInput(f"contract must be 'sdpa' (F.scaled_dot_product_attention's signature), "
                       f"'lesson' (the lesson's module of functions) or 'varlen' "
                       f"(flash-attention's attn_varlen signature), not {contract!r}")
    if contract == "sdpa" and backend not in (None, "torch"):
        raise BadInput(f"the sdpa contract takes torch tensors: backend must be 'torch' or None, "
                       f"not {backend!r}")
    build = _varlen_options if contract == "varlen" else _options
    if depth is None and contract != "varlen":
        depth = "quick"
    options = build(depth=depth, dtype=dtype, device=device, deadline=deadline_s,
                    budget=budget_s, exitfirst=exitfirst, seed=seed,
                    only=(only,) if isinstance(only, str) else tuple(only or ()),
                    expect=_path(expect), repro_dir=_path(repro_dir), isolation=isolation,
                    backend=backend, mask_convention=mask_convention,
                    causal_alignment=causal_alignment, empty_rows=empty_rows,
                    window_counting=window_counting,
                    unsupported=unsupported, refuses=tuple(refuses or ()), timeout=timeout_s,
                    warmup=warmup_s, memory_limit=memory_limit, scratch_limit=scratch_limit,
                    shrink=shrink,
                    **({} if import_timeout_s is None else {"import_timeout": import_timeout_s}))
    target = os.fspath(fn_or_locator) if isinstance(fn_or_locator, os.PathLike) else fn_or_locator
    from attnzoo import carry

    if isinstance(target, str) and not carry.is_source(target):
        if name is not None:
            raise BadInput("name= picks a function of a source string; a locator names its own "
                           "('file.py:func')")
        _agrees(target, contract)
        try:
            return _run(target, options, contract, None, progress)
        except BadInput as e:
            raise BadInput(_respelt(e)) from None
    if isinstance(target, str):
        module = carry.from_source(target, contract or "sdpa", name)
    elif callable(target):
        if name is not None:
            raise BadInput("name= picks a function of a source string; a function is checked "
                           "by its own name")
        module = carry.from_callable(target, contract or "sdpa")
    else:
        raise BadInput(f"attnzoo.check takes a function, Python source or a locator string, not "
                       f"a {type(target).__name__}")
    kept = options.repro_dir is not None  # the reproductions import it: it stays beside them
    folder = os.path.abspath(options.repro_dir) if kept else \
        tempfile.mkdtemp(prefix="attnzoo-check-")  # private: mode 0700
    try:
        os.makedirs(folder, exist_ok=True)
        path = carry.write(module, folder)
        locator = path if module.function is None else f"{path}:{module.function}"
        try:
            return _run(locator, options, contract or "sdpa", module.display, progress)
        except BadInput as e:  # named as the caller named it, not by the file carried here
            raise BadInput(_respelt(e).replace(locator, module.display)) from None
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)


def _path(value):
    return None if value is None else os.fspath(value)


def _options(**values):
    """Options.build, its BadInput spelling each option as this API's keyword."""
    try:
        return Options.build(**values)
    except BadInput as e:
        raise BadInput(_respelt(e)) from None


def _varlen_options(**values):
    """The options of a varlen check (attnzoo.varlen_check.options), spelt as _options's."""
    from attnzoo import varlen_check

    try:
        return varlen_check.options(**values)[0]
    except BadInput as e:
        raise BadInput(_respelt(e)) from None


def _respelt(error):
    text = str(error).replace("--contract varlen", "contract='varlen'")
    return re.sub(r"--[a-z][a-z-]*", lambda m: KEYWORDS.get(m[0], m[0]), text)


def _agrees(locator, contract):
    """Refuse, before anything runs, a module locator under the sdpa contract: the command
    line checks a module by the lesson contract (a callable is named as ``file.py:func``)."""
    from attnzoo.sandbox.target import BadTarget, _split

    try:
        _, _, attr = _split(locator)
    except BadTarget as e:
        raise BadInput(str(e)) from None
    if contract == "varlen" and not attr:
        raise BadInput(f"{locator} names a module: name its varlen callable ('{locator}:func')")
    if contract == "sdpa" and not attr:
        raise BadInput(f"{locator} names a module, which is checked by the lesson contract: name "
                       f"its callable ('{locator}:func'), pass contract='lesson', or contract=None "
                       "to check it as attnzoo check does")


class _Quiet:
    """A stderr for the progress lines nobody asked for."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


def _run(locator, options, contract, display, progress):
    """run_check as ``attnzoo check`` runs it; the Report, or BadInput when the locator named
    another contract than the one asked for."""
    from attnzoo.checking import run_check
    from attnzoo.progress import Progress
    from attnzoo.report import check_text

    shown = None if progress else Progress(_Quiet())
    if contract == "varlen":
        from attnzoo import varlen_check

        chosen = varlen_check.detectors_named(options.only)
        document, code = varlen_check.run(locator, options, chosen, name=display,
                                          progress=shown)
        if display is not None:
            document["target"] = display
        texts = (varlen_check.text(document, chosen), varlen_check.text(document, chosen, True))
        return report(document, code, {d.NAME: d for d in chosen}, texts,
                      tuple(document["implementations"][0]["not_run"]))
    sections, detectors, document, code = run_check(locator, options, name=display,
                                                    progress=shown)
    kinds = {impl["target"]["contract"] for impl in document["implementations"]}
    if contract is not None and kinds - {contract}:
        raise BadInput(f"{locator} holds {' and '.join(sorted(kinds))} implementations, not "
                       f"only {contract}: pass contract={sorted(kinds)[0]!r}, or contract=None "
                       "to check whatever it names")
    if display is not None:
        document["target"] = display
    unrun = [n for s in sections for n in s["not_run"]]
    if document["summary"]["not_run"] > len(unrun):  # implementations the deadline left unloaded
        unrun += list(detectors)
    texts = (check_text(sections, detectors, options, document),
             check_text(sections, detectors, options, document, verbose=True))
    return report(document, code, detectors, texts, tuple(dict.fromkeys(unrun)))
