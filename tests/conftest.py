"""Test tiers and the browser tests' fixtures.

``pytest -m "not slow"`` is the edit-test loop (under 90 s on two cores); plain ``pytest`` (what CI
runs) includes everything. Tests mark themselves with ``@pytest.mark.slow``; the long-standing slow
tests of the older modules are listed here by name, so the tier is decided in one place for them.

The browser fixtures start one ``posenc explore`` server and one headless Chromium per module that
asks for them. Without Chromium or Playwright they skip with the reason, unless
``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure (``browser_support``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_support import SIZES, chromium_or_skip, explore_server, headless_chromium, watched_page
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


@pytest.fixture(scope="module")
def client():
    """The explorer's app in process (``TestClient``), any Host header allowed; one per module."""
    from fastapi.testclient import TestClient

    from posenc.teaching.explorer.app import create_app

    with TestClient(create_app(allowed_hosts=None)) as c:
        yield c


# -- the fused kernels -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fused_cpu():
    from posenc.rope.kernels import cpu

    lib = cpu.library()
    if lib is None:
        pytest.skip(f"the fused CPU kernel cannot be built here: {cpu.unavailable_reason()}")
    return lib


@pytest.fixture
def count_fused(monkeypatch):
    """Count calls of the fused kernel made through the dispatcher."""
    from posenc.rope import kernels

    calls = []
    original = kernels.kernel_for

    def spy(device):
        kernel = original(device)
        if kernel is None:
            return None

        def counted(*args, **kwargs):
            calls.append(1)
            return kernel(*args, **kwargs)

        return counted

    monkeypatch.setattr(kernels, "kernel_for", spy)
    return calls


# -- the tour, run once ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def ran(tmp_path_factory):
    """``posenc tour`` run once into a temporary folder, printed at 80 columns as ``posenc tour | cat``
    gets it (rich's default width when stdout is not a terminal): ``(context, printed text)``."""
    import io

    import rich.console

    import posenc.teaching.tour as tour

    out = tmp_path_factory.mktemp("tour") / "figures"
    buffer = io.StringIO()
    console = rich.console.Console(file=buffer, width=80, color_system=None)
    ctx = tour.run_tour(out, console=console)
    return ctx, buffer.getvalue()


@pytest.fixture(scope="session")
def facts(ran):
    """Every number the tour recorded, by name."""
    return ran[0].facts


@pytest.fixture(scope="session")
def flowing(ran):
    """The tour's text with every run of whitespace made one space, for reading wrapped prose."""
    return " ".join(ran[1].split())


# -- the browser tests' fixtures ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium_path():
    """The Chromium executable; skips the module's browser tests without it (fails in CI)."""
    return chromium_or_skip()


@pytest.fixture(scope="module")
def explore_args() -> tuple[str, ...]:
    """What the module's server is started with after ``posenc explore --port 0``; a module overrides
    this fixture to serve something of its own (a lab run, say)."""
    return ()


@pytest.fixture(scope="module")
def server(chromium_path, explore_args):
    """``posenc explore --port 0`` in a subprocess, one per module; yields its base URL."""
    with explore_server(*explore_args) as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium_path, server):
    """One headless Chromium per module."""
    with headless_chromium(chromium_path) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where screenshots go: ``$POSENC_SCREENSHOT_DIR``, else a temporary folder (never the repository)."""
    folder = os.environ.get("POSENC_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _watched(browser, server, size):
    with watched_page(browser, server, size) as pg:
        yield pg


@pytest.fixture
def page(browser, server):
    """A fresh page at the desktop size; the test fails on any of ``browser_support.new_page``'s problems."""
    yield from _watched(browser, server, SIZES["desktop"])


@pytest.fixture
def phone(browser, server):
    """A fresh page at the phone size, held to the same problems as ``page``."""
    yield from _watched(browser, server, SIZES["phone"])
