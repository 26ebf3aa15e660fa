"""Test tiers.

``pytest -m "not slow"`` is the edit-test loop (under 90 s on two cores); plain ``pytest`` (what CI
runs) includes everything. Tests mark themselves with ``@pytest.mark.slow``; the long-standing slow
tests of the older modules are listed here by name, so the tier is decided in one place for them.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so a run of the suite (CI's included) is
# reproducible; POSENC_HYPOTHESIS=explore draws fresh random examples to search further.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("POSENC_HYPOTHESIS") == "explore" else "repeatable")

#: whole modules that drive a real browser
SLOW_MODULES = {"test_explorer_browser"}

#: substrings of test names that each take seconds (Triton's interpreter, torch.compile, subprocess
#: runs of the CLI or torchrun, training runs, long-position parity sweeps)
SLOW_NAMES = (
    "test_triton_interpreter",
    "test_compile_tinylm",
    "test_compile_dispatcher_has_no_graph_break",
    "test_cli_tiny_run_writes_json",
    "test_torchrun_two_processes_match_one",
    "test_long_positions_exact_where_the_reference_drifts",
    "test_reference_angles_drift_with_position",
    "test_every_section_prints_its_title",
    "test_smoke_run_writes_the_agreed_report",
    "test_interrupted_run_resumes_to_the_same_numbers",
    "test_tables_are_exact_and_survive_half_precision_casts",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if module in SLOW_MODULES or any(s in item.name for s in SLOW_NAMES):
            item.add_marker(pytest.mark.slow)
