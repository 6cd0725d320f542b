"""One thin adapter per varlen implementation, each ``attn_varlen`` with the varlen contract's
signature (docs/varlen.md) and its ``DECLARATION``.

As for the SDPA adapters (:mod:`attnzoo.survey.adapters`), an adapter converts only what the
library's API defines differently (the layout, how sequences, a paged cache or a bias are
spelt) and never the library's math; its docstring and its declaration's ``converts`` say what.
The library is imported in the sandbox worker, on the first look-up of ``attn_varlen``, so
reading a declaration needs nothing installed. A declared convention names the link where the
library states it; the survey judges the library by it, as ``check --contract varlen`` does.
"""

import importlib
import importlib.metadata
from dataclasses import dataclass

from attnzoo.options import VARLEN_EMPTY_ROWS, WINDOW_COUNTINGS

NAMES = ("flex", "flex_compiled", "flex_compiled_static", "hf_sdpa", "hf_eager", "jax_nn",
         "xt_attend")
ALIGNMENTS = ("bottom-right", "top-left")  # check --causal-alignment
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Declaration:
    """What one varlen implementation is, where it says so, and what its adapter converts."""

    name: str  # the survey's row: "flex"
    title: str  # what a reader recognises
    distribution: str  # the distribution whose version is reported
    module: str  # what the worker imports when it loads the adapter
    docs: str  # where the library documents the function
    converts: str  # what the adapter converts, in a sentence or two
    causal_alignment: str = "bottom-right"  # with the link that states it
    causal_alignment_docs: str = ""
    empty_rows: str = "zero"  # attnzoo.options.VARLEN_EMPTY_ROWS' spelling
    empty_rows_docs: str = ""
    window_counting: str = "inclusive"  # attnzoo.options.WINDOW_COUNTINGS' spelling
    window_counting_docs: str = ""
    dtypes: tuple = DTYPES
    dtypes_docs: str = ""  # where it says so, when it declares fewer dtypes
    # what the library's API has no way to spell (detectors.kit.varlen_capabilities): those
    # cases are set aside, as check --contract varlen --unsupported sets them aside
    unsupported: tuple = ()
    unsupported_docs: str = ""  # the link that shows it (the function's signature, say)
    call_seconds: float = 30.0  # time limit per call (a compiling kernel needs more)
    install: str = "pip install torch"

    def __post_init__(self):
        for what, value, allowed in (("causal_alignment", self.causal_alignment, ALIGNMENTS),
                                     ("empty_rows", self.empty_rows, VARLEN_EMPTY_ROWS),
                                     ("window_counting", self.window_counting,
                                      WINDOW_COUNTINGS)):
            if value not in allowed:
                raise ValueError(f"{self.name}: {what} {value!r} is not one of "
                                 f"{', '.join(allowed)}")
            if not getattr(self, f"{what}_docs"):
                raise ValueError(f"{self.name}: declares {what} {value!r} without "
                                 f"{what}_docs, the link that states it")
        from detectors.kit.varlen_capabilities import parse

        if parse(self.unsupported) != tuple(self.unsupported):
            raise ValueError(f"{self.name}: unsupported must be a tuple in the vocabulary's "
                             f"order: {', '.join(parse(self.unsupported))}")
        if self.unsupported and not self.unsupported_docs:
            raise ValueError(f"{self.name}: declares unsupported features without "
                             "unsupported_docs, the link that shows it")
        if set(self.dtypes) - set(DTYPES) or not self.dtypes:
            raise ValueError(f"{self.name}: dtypes must be among {', '.join(DTYPES)}")
        if tuple(self.dtypes) != DTYPES and not self.dtypes_docs:
            raise ValueError(f"{self.name}: declares fewer dtypes without dtypes_docs")

    def version(self):
        """The installed version of the distribution, or None when it is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


def declarations():
    """Every varlen adapter's declaration, in survey order: (module name, Declaration)."""
    return [(n, importlib.import_module(f"{__name__}.{n}").DECLARATION) for n in NAMES]


def locator(name):
    """The adapter's ``attn_varlen``; a name that is a file path (a test's fake library) is
    that file's."""
    return f"{name}:attn_varlen" if name.endswith(".py") else f"{__name__}.{name}:attn_varlen"


def adapter_path(name):
    """Where the adapter lives, as the survey page links it."""
    return name if name.endswith(".py") else f"attnzoo/survey/varlen_adapters/{name}.py"


def loader(declaration, fn):
    """The module ``__getattr__`` that imports the library when the worker looks up
    ``attn_varlen`` (:mod:`attnzoo.survey.adapters._lazy`'s rule, for this signature)."""
    from attnzoo.survey.adapters import _lazy

    return _lazy.loader(declaration, fn, name="attn_varlen")


# the SDPA survey's kinds (attnzoo.survey.capabilities.KINDS), and a refusal the library words
KINDS = {
    "divergence": "the library does not do what its documentation says",
    "limitation": "the library refuses the call and says it does not support it",
    "convention": "a convention the library documents, where libraries legitimately differ",
    "artefact": "attnzoo's own mistake, not the library's",
}


@dataclass(frozen=True)
class Review:
    """A flagged detector of the survey read against the library's documentation: named by
    the detector and dtype of survey-varlen.json, never by a message's text. ``kind`` is one
    of :data:`KINDS`; ``reproduce`` a standalone script that shows it with the library alone."""

    detector: str
    dtype: str
    kind: str  # one of KINDS
    docs: str = ""  # where the library documents (or its source says) it
    says: str = ""  # what it says, in a sentence of its own
    note: str = ""  # what the evidence shows
    issue: str = ""  # an upstream report of the same, where there is one
    reproduce: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"review kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind != "artefact" and not (self.docs and self.says):
            raise ValueError(f"a {self.kind} review needs docs and says")


def reviews(module):
    """The adapter's reviews of its findings, keyed (detector, dtype); a fake library's file
    may define ``REVIEWS`` too."""
    if module.endswith(".py"):
        import runpy

        found = runpy.run_path(module).get("REVIEWS", ())
    else:
        found = getattr(importlib.import_module(f"{__name__}.{module}"), "REVIEWS", ())
    return {(r.detector, r.dtype): r for r in found}
