"""The varlen contract's zoo: one file per mistake in packed, paged attention, and decoys.

A bug file holds ``BUG = Bug(...)`` (the metadata, as data, the same fields as the SDPA zoo's)
and ``VARLEN``, a callable with flash-attention's ``attn_varlen`` signature whose faulty line is
marked ``# BUG``. Each bug is one of the decoys in ``zoo/varlen/decoys/`` — a per-sequence loop,
a tiled online-softmax kernel over pages, a split-KV kernel merged by LSE — with one method
replaced, so everything but the mistake is a correct kernel in the style real ones are written.
``seen_in`` links the public report the mistake comes from (the research notes of issue 29).
Files are discovered; importing this package validates them. ``caught_by`` names detectors of
``detectors/varlen/``; tests/test_varlen_detectors.py checks they exist and catch the bug.
The SDPA zoo's discovery skips this package, so neither contract sees the other's entries.
"""

import importlib
import pkgutil
from dataclasses import replace
from pathlib import Path

from zoo import Bug, Decoy, Entry, ZooError, _validate_bug, _validate_decoy

CATEGORIES = {
    "packing": "cu_seqlens offsets, lengths used against allocated, rows of other sequences",
    "paging": "block tables, physical placement of pages, page sizes",
    "masking": "causal alignment, window ends, fill values, empty rows",
    "scores": "softcap and ALiBi: their form, their order against bias and mask, overflow",
    "heads": "which key/value head serves which query head",
    "lse": "the log-sum-exp a kernel returns or merges with",
    "layout": "how q, k and v lie in memory: strides, storage offsets, views of wider buffers",
}
ATTRIBUTE = "VARLEN"


def _discover(folder, package, kind):
    entries = []
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda i: i.name):
        if info.ispkg or info.name.startswith("_"):
            continue
        name = f"{package}.{info.name}"
        where = f"{package.replace('.', '/')}/{info.name}.py"
        module = importlib.import_module(name)
        meta = getattr(module, kind, None)
        if kind == "BUG":
            if not isinstance(meta, Bug):
                raise ZooError(f"{where}: define BUG = Bug(...) with the entry's metadata")
            if meta.category not in CATEGORIES:
                raise ZooError(f"{where}: BUG.category {meta.category!r} is not one of "
                               f"{sorted(CATEGORIES)}")
            _validate_bug(replace(meta, category="masking"), where)  # the other fields
            if "https://" not in meta.seen_in:
                raise ZooError(f"{where}: BUG.seen_in must link the public report")
        else:
            if not isinstance(meta, Decoy):
                raise ZooError(f"{where}: define DECOY = Decoy(...) with the decoy's metadata")
            _validate_decoy(meta, where)
        if not callable(getattr(module, ATTRIBUTE, None)):
            raise ZooError(f"{where}: provide VARLEN, a callable with attn_varlen's signature")
        entries.append(Entry(meta, name, Path(module.__file__), ("varlen",)))
    return entries


def _load():
    here = Path(__file__).parent
    bugs = _discover(here, "zoo.varlen", "BUG")
    decoys = _discover(here / "decoys", "zoo.varlen.decoys", "DECOY")
    seen = {}
    for e in bugs + decoys:
        if e.id in seen:
            raise ZooError(f"duplicate id {e.id!r} in {seen[e.id]} and {e.path.name}")
        seen[e.id] = e.path.name
    return bugs, decoys


BUGS, DECOYS = _load()


def implementation(entry):
    return getattr(importlib.import_module(entry.module), ATTRIBUTE)


def conventions(entry):
    """What a decoy declares besides the contract's conventions (its module's CONVENTIONS, as
    detectors.kit.varlen.Target's fields): {} for a kernel that follows the contract's."""
    return dict(getattr(importlib.import_module(entry.module), "CONVENTIONS", {}))
