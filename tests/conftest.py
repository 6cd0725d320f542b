"""Which tests a plain ``pytest`` runs.

``pytest`` with no paths and no ``-m`` is the classroom run: the kill matrix and the tests of
what it is made of (the zoo, the detectors, the reference, the kit, the layout), which is what
a learner runs after adding a bug, so it costs little more than the matrix itself. Every other
module tests the application that drives them (the command line, the sandbox and its hostile
targets, grading, the survey, the depth tiers, the docs site): it is marked ``app``, and the
classroom run does not import it. ``pytest -m "app and not slow"`` runs those, and CI runs both.
Naming a path (``pytest tests/test_cli.py``) or a ``-m`` expression runs what it names.
"""

import pytest

from detectors.kit.battery import Battery

CLASSROOM = ("test_kill_matrix.py", "test_detectors.py", "test_zoo.py", "test_reference.py",
             "test_kit.py", "test_exact_oracle.py", "test_layout.py", "test_readme.py")
DEFAULT_MARKS = "not slow"  # the -m of pyproject.toml's addopts


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller decided
        config.option.classroom_only = config.workerinput["classroom_only"]
    else:
        config.option.classroom_only = (
            config.args_source == pytest.Config.ArgsSource.TESTPATHS
            and config.option.markexpr == DEFAULT_MARKS)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # pytest-xdist: what each worker is told at its start
    node.workerinput["classroom_only"] = node.config.option.classroom_only


def pytest_ignore_collect(collection_path, config):
    """The classroom run does not even import the application's test modules."""
    if config.option.classroom_only and collection_path.suffix == ".py":
        return collection_path.name.startswith("test_") and collection_path.name not in CLASSROOM
    return None


def pytest_report_header(config):
    if config.option.classroom_only:
        return ("the classroom run: the kill matrix and its parts; "
                "pytest -m \"app and not slow\" runs the application's tests")
    return None


@pytest.hookimpl(tryfirst=True)  # before ``-m`` reads the markers
def pytest_collection_modifyitems(config, items):
    """Every test outside CLASSROOM is ``app``; a classroom module marks its own tests of the
    deeper tiers ``app`` too, and the classroom run leaves those out."""
    for item in items:
        if item.path.name not in CLASSROOM:
            item.add_marker("app")
    if config.option.classroom_only:
        app = [item for item in items if item.get_closest_marker("app")]
        if app:
            items[:] = [item for item in items if not item.get_closest_marker("app")]
            config.hook.pytest_deselected(items=app)


@pytest.fixture(scope="session")
def battery(request):
    config = request.config
    return Battery(config.getoption("kill_matrix_seed"),
                   depth=config.getoption("kill_matrix_depth"))
