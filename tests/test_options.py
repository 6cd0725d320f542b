"""The options of a run of the detectors: built and validated once, then never changed.

``attnzoo check``, the pytest plugin and ``attnzoo grade`` build the same frozen object; the
defaults that depend on another value are filled in by :meth:`Options.build`, a bad value is one
line naming the option, and the facts the options draw on have one home each.
"""

import argparse
import dataclasses
import io
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

import zoo
from attnzoo import cli, options
from attnzoo.options import BadInput, Options
from attnzoo.pytest_plugin import respell
from attnzoo.sandbox import wire
from detectors.kit import battery, precision
from detectors.kit.depths import DEPTHS
from reference import FLOAT_DTYPES


@pytest.mark.parametrize("given, timeout, warmup", [
    ({}, options.CALL_SECONDS, options.WARMUP_SECONDS),
    ({"timeout": 5.0}, 5.0, 5.0),  # an explicit --timeout limits the first call too
    ({"timeout": 5.0, "warmup": 20.0}, 5.0, 20.0),
    ({"warmup": 2.0}, options.CALL_SECONDS, 2.0),
])
def test_the_time_limits_that_depend_on_each_other_are_filled_in_once(given, timeout, warmup):
    built = Options.build(**given)
    assert (built.timeout, built.warmup) == (timeout, warmup)
    assert built.import_timeout == options.IMPORT_SECONDS
    assert built.deadline == options.DEADLINES["standard"]
    assert Options.build(**dataclasses.asdict(built)) == built  # building again changes nothing


def test_the_deadline_grows_with_the_depth_is_stated_and_can_be_lifted():
    defaults = [Options.build(depth=d).deadline for d in DEPTHS]
    assert defaults == [options.DEADLINES[d] for d in DEPTHS] and defaults == sorted(defaults)
    assert Options.build(depth="deep", deadline=30).deadline == 30
    lifted = Options.build(deadline=0)
    assert lifted.deadline == 0 and Options.build(**dataclasses.asdict(lifted)) == lifted
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    shown = " ".join(out.getvalue().split())
    for depth, seconds in options.DEADLINES.items():
        assert f"{seconds:g} s at" in shown and depth in shown
    assert "0 for none" in shown


def test_built_options_are_frozen_and_normalised():
    built = Options.build(only=["causality", "known_answers", "causality"],
                          unsupported="dropout, gqa", refuses=["No kernel"])
    assert built.only == ("causality", "known_answers")
    assert built.unsupported == ("dropout", "gqa") and built.refuses == ("No kernel",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seed = 3


@pytest.mark.parametrize("given, words", [
    ({"seed": -1}, ["--seed must be 0 or more, not -1"]),
    ({"timeout": 0.0}, ["--timeout must be a positive number of seconds", "not 0"]),
    ({"timeout": float("nan")}, ["--timeout must be a positive number of seconds"]),
    ({"import_timeout": float("inf")}, ["--import-timeout must be a positive number"]),
    ({"warmup": 86401.0}, ["--warmup", "up to 86400 (a day)"]),
    ({"deadline": -2.0}, ["--deadline", "not -2"]),
    ({"deadline": float("inf")}, ["--deadline", "up to 86400"]),
    ({"import_timeout": None}, ["--import-timeout", "not None"]),
    ({"device": "nonsense"}, ["unknown --device 'nonsense'", "cpu"]),
    ({"depth": "deeper"}, ["--depth must be one of quick, standard, deep, not 'deeper'"]),
    ({"dtype": "float8"}, ["--dtype must be one of float64, float32, float16, bfloat16"]),
    ({"backend": "jax"}, ["--backend", "'jax'"]),
    ({"mask_convention": "maybe"}, ["--mask-convention", "keep, drop"]),
    ({"only": ["no_such_detector"]}, ["unknown detector 'no_such_detector'",
                                      "attnzoo detectors"]),
    ({"unsupported": "flash"}, ["--unsupported: unknown capability 'flash'"]),
    ({"unsupported": "help"}, ["--unsupported takes a comma-separated list of", "gqa"]),
    ({"isolation": "none"}, ["--isolation must be one of strict, process, not 'none'"]),
    ({"memory_limit": "8 gigs"}, ["--memory-limit must be a size such as 512M or 8G"]),
    ({"scratch_limit": 512}, ["--scratch-limit must be a size from 1M", "not 512"]),
])
def test_a_bad_value_is_one_line_naming_the_option(given, words):
    with pytest.raises(BadInput) as caught:
        Options.build(**given)
    line = str(caught.value)
    assert "\n" not in line
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


@pytest.mark.parametrize("given, size", [("8G", 8 << 30), ("1.5g", 3 << 29), ("640MiB", 640 << 20),
                                         (2 << 30, 2 << 30)])
def test_sizes_are_read_in_binary_units(given, size):
    assert Options.build(memory_limit=given).memory_limit == size


def test_the_command_line_builds_the_same_options():
    args = cli.build_parser().parse_args(["check", "x.py", "--timeout", "4", "--depth", "quick",
                                          "--refuses", "nope", "--no-shrink", "--only",
                                          "causality"])
    assert Options.from_args(args) == Options.build(
        timeout=4.0, depth="quick", refuses=("nope",), shrink=False, only=("causality",))


def test_the_plugin_names_its_own_options_in_a_message():
    assert respell("--timeout must be a positive number") == (
        "--attnzoo-timeout must be a positive number")
    assert respell("x.py is a callable: drop --backend numpy") == (
        "x.py is a callable: drop --attnzoo-backend numpy")
    assert respell("raise --import-timeout") == "raise --import-timeout"  # not the plugin's


def test_the_plugin_imports_nothing_of_the_project_until_it_has_a_target():
    """It loads in every pytest run: generic top-level names (reference, detectors) must not
    land in sys.modules of someone else's test session."""
    code = ("import sys, attnzoo.pytest_plugin; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('reference', 'detectors', 'zoo', 'numpy', 'torch')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_dtypes_and_depths_have_one_home():
    assert precision.FORMATS is FLOAT_DTYPES and wire.FLOATS is FLOAT_DTYPES
    assert battery.DEPTHS is DEPTHS and zoo.DEPTHS is DEPTHS
    parser = argparse.ArgumentParser()
    options.add_run_arguments(parser, depth="quick")
    choices = {a.dest: a.choices for a in parser._actions if a.choices}
    assert choices == {"dtype": FLOAT_DTYPES, "depth": DEPTHS}
