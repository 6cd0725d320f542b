"""The rooms of the house, read from the imports: who may import whom.

- ``reference/`` imports numpy and torch only: it must share no code with what it judges.
- ``zoo/`` imports ``reference/``, its own metadata and the names of the battery's tiers
  (``detectors.kit.depths``, a module without imports, for ``BUG.depth``): a bug never leans on
  a detector.
- ``detectors/`` holds the detector files and their kit: a detector imports the kit and
  ``reference/``; the kit imports ``reference/`` and itself. Neither imports the application.
- ``attnzoo/`` is the application; only ``attnzoo/devtools/`` imports matplotlib or mutmut, and
  only the command line dispatches to it.

Every import counts, at module level or inside a function, since a lazy import is still a
dependency. The failure names the file, the line and the import.
"""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("reference", "zoo", "detectors", "attnzoo")
STDLIB = set(sys.stdlib_module_names)
TIERS = "detectors.kit.depths"  # the one module of the kit the zoo may import


def imports(path):
    """(line, top-level-qualified name) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def room(path):
    rel = path.relative_to(ROOT).parts
    if rel[0] == "detectors":
        return "detectors/kit" if rel[1] == "kit" else "detectors"
    if rel[0] == "attnzoo":
        if rel[1] in ("devtools", "cli.py"):
            return f"attnzoo/{rel[1].removesuffix('.py')}"
        return "attnzoo"
    return rel[0]


# room -> predicate on an imported module name: may it import that?
def _third_party(allowed):
    return lambda name: name.split(".")[0] in STDLIB or name.split(".")[0] in allowed


RULES = {
    "reference": lambda n: _third_party({"numpy", "torch", "reference"})(n),
    "zoo": lambda n: _third_party({"numpy", "torch", "reference", "zoo"})(n) or n == TIERS,
    "detectors/kit": lambda n: _third_party({"numpy", "torch", "reference"})(n)
    or n == "detectors.kit" or n.startswith("detectors.kit."),
    "detectors": lambda n: _third_party({"numpy", "torch", "reference"})(n)
    or n in ("detectors", "detectors.kit") or n.startswith("detectors.kit."),
    "attnzoo": lambda n: n.split(".")[0] not in ("matplotlib", "mutmut")
    and not n.startswith("attnzoo.devtools"),
    "attnzoo/cli": lambda n: n.split(".")[0] not in ("matplotlib", "mutmut"),
    "attnzoo/devtools": lambda n: True,
}
WHY = {
    "reference": "the reference imports numpy and torch only",
    "zoo": "a zoo entry imports the reference, the zoo's metadata and the tiers' names only",
    "detectors/kit": "the kit imports numpy, torch, reference/ and itself, never the application",
    "detectors": "a detector imports the kit and reference/ only",
    "attnzoo": "only attnzoo/devtools imports matplotlib or mutmut; only the command line "
    "dispatches to the developer tools",
    "attnzoo/cli": "the command line parses and dispatches; matplotlib and mutmut stay in devtools",
}
FILES = sorted(p for top in PROJECT for p in (ROOT / top).rglob("*.py"))


def test_every_room_has_files():
    assert {room(p) for p in FILES} >= set(WHY)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_imports_respect_the_rooms(path):
    where = room(path)
    bad = [(line, name) for line, name in imports(path) if not RULES[where](name)]
    assert not bad, "; ".join(
        f"{path.relative_to(ROOT)}:{line} imports {name} ({WHY[where]})" for line, name in bad
    )


def test_the_detectors_package_itself_is_discovery_only():
    """``detectors/__init__.py`` finds detector files; it must not pull in the application."""
    names = [n for _, n in imports(ROOT / "detectors" / "__init__.py")]
    assert not [n for n in names if n.split(".")[0] in PROJECT], names


def test_a_violation_is_named(tmp_path):
    """The rule can fail: a detector that imports the sandbox is reported with its line."""
    fake = ROOT / "detectors" / "_layout_probe.py"
    rule = RULES["detectors"]
    assert not rule("attnzoo.sandbox.executor")
    assert not rule("detectors.causality")
    assert not RULES["zoo"]("detectors")
    assert not RULES["zoo"]("detectors.kit.battery") and RULES["zoo"](TIERS)
    assert not RULES["reference"]("zoo")
    assert not RULES["attnzoo"]("matplotlib.pyplot")
    assert rule("detectors.kit.expect") and rule("reference.loop_oracle")
    assert room(fake) == "detectors"


def test_the_tiers_the_zoo_may_import_import_nothing():
    """The zoo's one door into the kit stays a list of names: no import passes through it."""
    path = ROOT / (TIERS.replace(".", "/") + ".py")
    assert list(imports(path)) == []
