"""The fixed vocabulary an adapter uses to say what its library does not support.

A declaration is data: ``UNSUPPORTED`` (features from :data:`VOCABULARY`), ``DTYPES`` (what
the library computes in), ``REFUSES`` (messages with which the library refuses a call it does
not support), ``EMPTY_ROWS`` (what the library gives a query with no allowed key, a convention
of :data:`attnzoo.options.EMPTY_ROWS` the detectors then judge it by, with where the library
says or does so). :func:`features` names the features a battery call uses, so the cases outside a
declaration can be set aside instead of being scored against the library.
"""

import importlib.metadata
from dataclasses import dataclass

from attnzoo.options import CALL_SECONDS, EMPTY_ROWS
from detectors.kit.capabilities import FLOAT64_AS_FLOAT32, VOCABULARY, features  # noqa: F401


@dataclass(frozen=True)
class Declaration:
    """What one implementation is, where it comes from and what it does not offer."""

    name: str  # the survey's row: "torch-sdpa-math"
    title: str  # what a reader recognises: "torch.nn.functional.scaled_dot_product_attention"
    distribution: str  # the PyPI distribution whose version is reported
    module: str  # what the worker imports when it loads the adapter
    unsupported: frozenset = frozenset()
    dtypes: tuple = ("float32", "float64")
    refuses: tuple = ()  # messages of a run-time refusal ("No available kernel")
    causal_alignment: str = "top-left"  # where is_causal puts the diagonal when L != S
    call_seconds: float = CALL_SECONDS  # time limit per call (compiling kernels need more)
    install: str = "pip install -e '.[survey]'"  # how to get the library, for the skip line
    docs: str = ""  # where the library documents the function
    empty_rows: str = "zero"  # a query with no allowed key: zero, or uniform (1/S, mean of V)
    empty_rows_docs: str = ""  # where the library documents (or its source does) that convention
    gqa_grouping_docs: str = ""  # where it shows its grouping, when it declares gqa=interleaved
    float64_docs: str = ""  # where it says so, when it declares a float64=... convention

    def __post_init__(self):
        unknown = set(self.unsupported) - set(VOCABULARY)
        if unknown:
            raise ValueError(f"{self.name}: unknown capability {sorted(unknown)[0]!r}; "
                             f"use one of {', '.join(VOCABULARY)}")
        if self.empty_rows not in EMPTY_ROWS:
            raise ValueError(f"{self.name}: empty_rows {self.empty_rows!r} is not one of "
                             f"{', '.join(EMPTY_ROWS)}")
        if self.empty_rows != "zero" and not self.empty_rows_docs:
            raise ValueError(f"{self.name}: declares empty_rows {self.empty_rows!r} without "
                             "empty_rows_docs, the link that says the library does so")
        if "gqa=interleaved" in self.unsupported and not self.gqa_grouping_docs:
            raise ValueError(f"{self.name}: declares gqa=interleaved without gqa_grouping_docs, "
                             "the link that shows the library does so")
        if FLOAT64_AS_FLOAT32 & set(self.unsupported) and not self.float64_docs:
            raise ValueError(f"{self.name}: declares a float64 convention without float64_docs, "
                             "the link that says the library computes float64 so")
        if "float64" in self.unsupported and "float64" in self.dtypes:
            raise ValueError(f"{self.name}: declares float64 unsupported but lists it in dtypes")

    def version(self):
        """The installed version of the distribution, or None when it is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


def supported(declaration, call):
    """Whether a battery call stays inside what the implementation declares it offers."""
    return not (features(call) & declaration.unsupported)


KINDS = {
    "divergence": "the library does not do what its documentation says",
    "convention": "a convention the library documents, where libraries legitimately differ",
    "artefact": "attnzoo's own mistake, not the library's",
}


@dataclass(frozen=True)
class Review:
    """One root cause of the survey read against the library's own documentation.

    It names the root cause as survey.json's diagnosis does (the dtype and the set of
    ``features`` the failing cases share), never by an error's text, and says what the
    documentation at ``docs`` says about that input, in a sentence of its own (``says``)."""

    dtype: str
    features: tuple  # the diagnosis' "features" of the root cause, e.g. ("no_allowed_key",)
    kind: str  # one of KINDS
    docs: str = ""  # where the library documents (or its source says) it
    says: str = ""  # what it says, paraphrased in one sentence
    issue: str = ""  # an upstream report, where there is one
    note: str = ""  # how the reproduction departs from it, or why a convention is undeclared
    declared: bool = False  # a convention the adapter now declares (the row needs a rerun)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"review kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind != "artefact" and not (self.docs and self.says):
            raise ValueError(f"a {self.kind} review needs docs and says")

    def key(self):
        return self.dtype, frozenset(self.features)
