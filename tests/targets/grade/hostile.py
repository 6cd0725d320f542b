import os
import sys


def test_hangs(attention):
    while True:
        pass


def test_calls_sys_exit(attention):
    sys.exit(3)


def test_kills_its_process(attention):
    os._exit(7)


def test_fine_after_all_that(attention):
    assert attention.causal_mask(2).shape == (2, 2)
