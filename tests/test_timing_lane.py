"""The timing lane catches a real error: with every cache-lookup figure
doubled (``STANCE_MAGIC_INJECT=lookup2x``, see ``tests/conftest.py``), the
tests that hold the lookup figure against sources outside stance_magic
(torch's profiler, an outside clock) fail, quiet or beside a hog
(``STANCE_MAGIC_INJECT=lookup2x python benchmarks/stress.py`` runs the whole lane so)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: The timing tests that hold the lookup figure against torch's profiler on
#: functions whose lookup is well above the hooks' own cost (on a tiny
#: function the bound allows for that cost, so a 2x lookup of 1 us passes).
LOOKUP_TESTS = (
    "tests/test_report.py::test_guard_cost_timed_in_situ_against_direct_check_and_profiler",
    "tests/test_real_models.py::test_gpt2_guard_figure_in_situ_against_profiler_and_outside_clock",
    "tests/test_call_anatomy.py::test_each_part_within_1_5x_of_the_profiler_and_the_outside_clock"
    "[a function of 64-300]",
    "tests/test_call_anatomy.py::test_each_part_within_1_5x_of_the_profiler_and_the_outside_clock"
    "[GPT-2-20]",
)


@pytest.mark.timing
def test_the_lane_fails_on_a_doubled_lookup_figure():
    env = dict(os.environ, STANCE_MAGIC_INJECT="lookup2x")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *LOOKUP_TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    # (a parametrized test's id may hold spaces: up to pytest's " - " reason)
    failed = set(re.findall(r"^FAILED (.+?)(?: - .*)?$", out.stdout, re.M))
    assert out.returncode == 1, out.stdout[-3000:]
    assert failed == set(LOOKUP_TESTS), out.stdout[-3000:]
    # each on the lookup figure, not on something else
    assert out.stdout.count("lookup / profiler") + out.stdout.count("ours / profiler") >= 4
