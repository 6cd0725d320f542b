"""The catalogue is complete and well-formed: every entry teaches something and is caught."""

import inspect
import textwrap

import pytest

import zoo
from attnzoo.diff import method_diffs

BUGS = zoo.BUGS


def test_at_least_32_bugs_and_three_per_category():
    assert len(BUGS) >= 32
    for category in zoo.CATEGORIES:
        ids = [e.id for e in BUGS if e.meta.category == category]
        assert len(ids) >= 3, f"category {category} has {len(ids)} entries: {ids}"


def test_at_least_six_decoys():
    assert len(zoo.DECOYS) >= 6


@pytest.mark.parametrize("entry", BUGS, ids=[e.id for e in BUGS])
def test_entry_is_complete(entry):
    meta = entry.meta
    todo = [name for name in ("title", "category", "symptom", "lesson", "seen_in")
            if getattr(meta, name).startswith(zoo.TODO)]
    assert not todo, f"{entry.path.name}: still TODO: {', '.join(todo)}"
    assert meta.caught_by, f"{entry.path.name}: caught_by is empty: list the detectors " \
                           f"that catch it (attnzoo show {meta.id})"
    assert meta.lesson.rstrip().endswith("."), f"{entry.path.name}: lesson is one sentence"
    assert entry.path.stem == meta.id.replace("-", "_"), "the file is named for the mistake"


@pytest.mark.parametrize("entry", BUGS, ids=[e.id for e in BUGS])
def test_faulty_lines_are_marked(entry):
    for backend in entry.backends:
        impl = entry.implementation(backend)
        diffs = method_diffs(impl)
        assert diffs, f"{entry.id}/{backend} must subclass a reference class"
        source = "\n".join(textwrap.dedent(inspect.getsource(type(impl))).splitlines())
        assert "# BUG" in source, f"{entry.id}/{backend}: mark the faulty line with '# BUG:'"


def test_malformed_metadata_fails_loudly():
    good = dict(id="x-y", title="t", category="masking", symptom="silent", lesson="Do it.",
                source="", seen_in="somewhere", caught_by=("causality",))
    zoo._validate_bug(zoo.Bug(**good), "zoo/x_y.py")
    for field, value, message in (
        ("category", "maskng", "category"),
        ("symptom", "loud", "symptom"),
        ("id", "Not Kebab", "kebab-case"),
        ("caught_by", ["causality"], "tuple"),
        ("title", "", "title"),
    ):
        with pytest.raises(zoo.ZooError, match=message):
            zoo._validate_bug(zoo.Bug(**{**good, field: value}), "zoo/x_y.py")


@pytest.mark.parametrize("entry", BUGS, ids=[e.id for e in BUGS])
def test_named_detectors_exist(entry):
    """caught_by and gaps name detectors of the suite (the zoo itself never imports them)."""
    from detectors import by_name

    known = by_name()
    unknown = [d for d in entry.meta.caught_by + tuple(entry.meta.gaps) if d not in known]
    assert not unknown, f"{entry.path.name}: unknown detector(s) {unknown}; known: {sorted(known)}"


def test_duplicate_ids_fail_loudly(tmp_path):
    entry = BUGS[0]
    with pytest.raises(zoo.ZooError, match="duplicate id"):
        zoo._check_unique([entry, zoo.Entry(entry.meta, "zoo.copy", tmp_path / "copy.py",
                                            entry.backends)])


def test_a_file_without_metadata_fails_loudly(tmp_path, monkeypatch):
    package = tmp_path / "extra_zoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "forgot_metadata.py").write_text("NUMPY = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(zoo.ZooError, match="define BUG"):
        zoo._discover(package, "extra_zoo", "BUG")
