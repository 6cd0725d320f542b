"""The zoo: one file per mistake people make in attention code, and correct decoys beside it.

A bug file holds ``BUG = Bug(...)`` (its metadata, as data) and one to three implementations of
the contract with the faulty line marked ``# BUG``: ``NUMPY`` and ``TORCH`` follow the lesson
contract, ``SDPA`` the signature of ``F.scaled_dot_product_attention``. Each is a subclass of a
reference class with one method replaced, so everything but the mistake is the reference.
Files in ``zoo/decoys/`` hold ``DECOY = Decoy(...)`` and correct implementations that look
nothing like the reference. Files are discovered; nothing lists them. Importing this package
validates every file and fails loudly on missing or malformed metadata or a duplicate id; that
every detector named in ``caught_by`` and ``gaps`` exists is checked by ``tests/test_zoo.py``
(the zoo imports the reference and nothing else).
"""

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path

from detectors.kit.depths import DEPTHS  # the tiers BUG.depth names (no other kit import)

CATEGORIES = {
    "masking": "fill value, order of operations, convention, off-by-one, mask broadcasting",
    "scaling": "which dimension, how often, where",
    "softmax": "axis, stability, underflow and overflow, rows with no allowed key",
    "shapes": "transposes on batched tensors, splitting and merging heads, batch leaks",
    "heads": "multi-head and grouped-query attention: which key/value head serves which query",
    "causal": "alignment when T_q != T_k, decoding, prefix consistency",
    "state": "mutated inputs, randomness or dropout where there is none, call-order effects",
    "precision": "float32/float16/bfloat16 inputs, masks that overflow in low precision",
    "gradients": "a custom autograd.Function whose backward is wrong",
    "generated": "plausible wrong kernels that weak checks accept (KernelBench's allclose at "
                 "atol = rtol = 1e-2 on five torch.rand inputs of one shape)",
}
SYMPTOMS = {
    "crash": "raises an exception",
    "nan": "returns NaN or inf",
    "silent": "returns wrong numbers without complaint",
}
BACKENDS = ("numpy", "torch", "sdpa")
ATTRIBUTES = {"numpy": "NUMPY", "torch": "TORCH", "sdpa": "SDPA"}
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TODO = "TODO"  # a scaffolded field not filled in yet: imports, but tests/test_zoo.py fails


@dataclass(frozen=True)
class Bug:
    """What went wrong, how it shows, what it teaches and who catches it."""

    id: str  # kebab-case, unique: "mask-fill-zero"
    title: str  # one line
    category: str  # a key of CATEGORIES
    symptom: str  # a key of SYMPTOMS
    lesson: str  # one imperative sentence
    source: str  # the seed section it comes from, or "" when it comes from practice
    seen_in: str  # where the mistake is known to occur
    caught_by: tuple  # detectors expected to catch it on every backend it provides
    gaps: dict = field(default_factory=dict)  # detector -> why it cannot catch this bug
    # the shallowest battery tier at which caught_by catches it; below it the bug is invisible
    # (a tiled kernel is exact while the keys fit one tile), so every detector passes it there
    depth: str = "quick"


@dataclass(frozen=True)
class Decoy:
    """A correct implementation that looks nothing like the reference."""

    id: str
    title: str
    technique: str  # what makes it different
    why_correct: str  # one sentence


@dataclass(frozen=True)
class Entry:
    """A discovered zoo file: its metadata and the implementations it provides."""

    meta: object  # Bug or Decoy
    module: str  # "zoo.mask_fill_zero"
    path: Path
    backends: tuple  # which of BACKENDS it provides

    @property
    def id(self):
        return self.meta.id

    @property
    def is_bug(self):
        return isinstance(self.meta, Bug)

    def locator(self, backend):
        return f"{self.module}:{ATTRIBUTES[backend]}"

    def implementation(self, backend):
        return getattr(importlib.import_module(self.module), ATTRIBUTES[backend])


class ZooError(Exception):
    """A zoo file is malformed; the message names the file and the fix."""


def _validate_bug(bug, where):
    for name in ("id", "title", "lesson", "seen_in"):
        if not isinstance(getattr(bug, name), str) or not getattr(bug, name).strip():
            raise ZooError(f"{where}: BUG.{name} must be a non-empty string")
    if not ID_PATTERN.match(bug.id):
        raise ZooError(f"{where}: BUG.id {bug.id!r} must be kebab-case, like 'mask-fill-zero'")
    if bug.category not in CATEGORIES and not bug.category.startswith(TODO):
        raise ZooError(f"{where}: BUG.category {bug.category!r} is not one of {sorted(CATEGORIES)}")
    if bug.symptom not in SYMPTOMS and not bug.symptom.startswith(TODO):
        raise ZooError(f"{where}: BUG.symptom {bug.symptom!r} is not one of {sorted(SYMPTOMS)}")
    if not isinstance(bug.source, str):
        raise ZooError(f"{where}: BUG.source must be a string (the seed section, or '')")
    if not isinstance(bug.caught_by, tuple):
        raise ZooError(f"{where}: BUG.caught_by must be a tuple of detector names")
    if bug.depth not in DEPTHS:
        raise ZooError(f"{where}: BUG.depth {bug.depth!r} is not one of {', '.join(DEPTHS)}")
    if not isinstance(bug.gaps, dict):
        raise ZooError(f"{where}: BUG.gaps must be a dict: detector name -> why it cannot "
                       "catch this")


def _validate_decoy(decoy, where):
    for name in ("id", "title", "technique", "why_correct"):
        if not isinstance(getattr(decoy, name), str) or not getattr(decoy, name).strip():
            raise ZooError(f"{where}: DECOY.{name} must be a non-empty string")
    if not ID_PATTERN.match(decoy.id):
        raise ZooError(f"{where}: DECOY.id {decoy.id!r} must be kebab-case")


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
            _validate_bug(meta, where)
        else:
            if not isinstance(meta, Decoy):
                raise ZooError(f"{where}: define DECOY = Decoy(...) with the decoy's metadata")
            _validate_decoy(meta, where)
        backends = tuple(b for b in BACKENDS if hasattr(module, ATTRIBUTES[b]))
        if not backends:
            raise ZooError(f"{where}: provide at least one of NUMPY, TORCH, SDPA")
        entries.append(Entry(meta, name, Path(module.__file__), backends))
    return entries


def _check_unique(entries):
    seen = {}
    for entry in entries:
        if entry.id in seen:
            raise ZooError(f"duplicate id {entry.id!r} in {seen[entry.id]} and {entry.path.name}")
        seen[entry.id] = entry.path.name


def _load():
    here = Path(__file__).parent
    bugs = _discover(here, "zoo", "BUG")
    decoys = _discover(here / "decoys", "zoo.decoys", "DECOY")
    _check_unique(bugs + decoys)
    return bugs, decoys


BUGS, DECOYS = _load()


def entry(entry_id):
    for e in BUGS + DECOYS:
        if e.id == entry_id:
            return e
    raise KeyError(entry_id)
