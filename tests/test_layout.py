"""The rooms of the house, read from the imports: who may import whom.

- ``reference/`` imports numpy and torch only: it must share no code with what it judges.
- ``zoo/`` imports ``reference/``, its own metadata and the names of the battery's tiers
  (``detectors.kit.depths``, a module without imports, for ``BUG.depth``): a bug never leans on
  a detector.
- ``detectors/`` holds the detector files and their kit: a detector imports the kit and
  ``reference/``; the kit imports ``reference/``, itself and covertable (the deep tier's
  covering array). Neither imports the application.
- ``attnzoo/`` is the application; only ``attnzoo/devtools/`` imports matplotlib or mutmut, and
  only the command line dispatches to it.

Every import counts, at module level or inside a function, since a lazy import is still a
dependency. The failure names the file, the line and the import.

No two project modules import each other, directly or through others: a circle means code lives
in the wrong room, and a function-local import that hides one hides it from the reader too.
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
    # covertable builds the deep tier's covering array (detectors/kit/sweep.py)
    "detectors/kit": lambda n: _third_party({"numpy", "torch", "reference", "covertable"})(n)
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
    "detectors/kit": "the kit imports numpy, torch, covertable, reference/ and itself, never "
    "the application",
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


# -- no import circles -------------------------------------------------------------------------


def module_name(path, root=ROOT):
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path, modules, root=ROOT):
    """The modules of ``modules`` that the file imports, at module level or in a function:
    ``from a import b`` imports the module ``a.b`` when there is one, else ``a``."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            candidates = [[a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            candidates = [[f"{base}.{a.name}", base] for a in node.names]
        else:
            continue
        for names in candidates:
            for candidate in names:
                while candidate and candidate not in modules:
                    candidate = candidate.rpartition(".")[0]
                if candidate:
                    found.add(candidate)
                    break
    return found - {name}


def import_graph(files, root=ROOT):
    """Module -> the project modules it imports."""
    modules = {module_name(p, root) for p in files}
    return {module_name(p, root): imported_modules(p, modules, root) for p in files}


def circles(graph):
    """Every set of two or more modules that import each other through the graph, sorted."""
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {m: reach(m) for m in graph}
    found = {tuple(sorted({m} | {o for o in reached[m] if m in reached[o]}))
             for m in graph if m in reached[m]}
    return sorted(found)


def named(found):
    return "; ".join(" <-> ".join(c) for c in found)


def test_no_import_circles():
    found = circles(import_graph(FILES))
    assert not found, f"modules that import each other (move the code they share): {named(found)}"


def test_a_circle_is_named(tmp_path):
    """The rule can fail: a circle through a function-local import is reported, by its modules."""
    files = {"pkg/__init__.py": "",
             "pkg/a.py": "from pkg import b\n",
             "pkg/b.py": "def f():\n    from pkg.c import g\n",
             "pkg/c.py": "import pkg.a\n",
             "pkg/d.py": "from . import a\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg.a"}
    found = circles(graph)
    assert found == [("pkg.a", "pkg.b", "pkg.c")]
    assert named(found) == "pkg.a <-> pkg.b <-> pkg.c"
    assert circles({"x": {"y"}, "y": set()}) == []


def test_detectors_import_only_the_kits_face():
    """A detector imports the kit's public face (``detectors.kit.FACE``) and reaches the rest
    through its subject, so the harness behind the face can change without touching one."""
    from detectors.kit import FACE

    face = {f"detectors.kit.{m}" for m in FACE}
    bad = [f"{path.relative_to(ROOT)}:{line} imports {name}"
           for path in FILES if room(path) == "detectors" and path.name != "__init__.py"
           for line, name in kit_imports(path) if name not in face]
    assert not bad, "; ".join(bad) + " (the kit's face is detectors.kit.FACE)"
    assert all((ROOT / "detectors" / "kit" / f"{m}.py").exists() for m in FACE)


def kit_imports(path):
    """(line, module) for every kit module the file imports, ``from detectors.kit import x``
    read as ``detectors.kit.x``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "detectors.kit":
            yield from ((node.lineno, f"detectors.kit.{a.name}") for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("detectors.kit."):
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names
                        if a.name.startswith("detectors.kit."))


def test_the_face_rule_can_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from detectors.kit import expect, subject\nimport detectors.kit.judge\n")
    assert [n for _, n in kit_imports(probe)] == [
        "detectors.kit.expect", "detectors.kit.subject", "detectors.kit.judge"]


def test_the_tiers_the_zoo_may_import_import_nothing():
    """The zoo's one door into the kit stays a list of names: no import passes through it."""
    path = ROOT / (TIERS.replace(".", "/") + ".py")
    assert list(imports(path)) == []
