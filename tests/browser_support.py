"""What the browser test modules share: finding Chromium, skipping (or failing in CI) without it,
serving ``posenc explore`` from a subprocess, and launching the browser.

The browser is the system Chromium, or the executable ``$POSENC_CHROMIUM`` names (Playwright never
downloads one). Without it the browser tests skip with the reason, unless ``POSENC_REQUIRE_BROWSER=1``
(set in CI), which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator, Sequence

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REQUIRE = os.environ.get("POSENC_REQUIRE_BROWSER") == "1"


def find_chromium() -> str | None:
    """``$POSENC_CHROMIUM`` if set (and only that), else the system Chromium."""
    chosen = os.environ.get("POSENC_CHROMIUM")
    candidates = (
        [chosen] if chosen else ["/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")]
    )
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (POSENC_REQUIRE_BROWSER=1 requires the browser tests to run)")
    pytest.skip(reason)


def chromium_or_skip() -> str:
    """The Chromium executable, after checking that Playwright is importable; skips (or fails) if not."""
    path = find_chromium()
    if path is None:
        where = os.environ.get("POSENC_CHROMIUM") or "/usr/bin/chromium and PATH"
        unavailable(
            f"Chromium not found (looked at {where}); install it with the system package "
            "manager, e.g. `apt-get install chromium`, or point $POSENC_CHROMIUM at it"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the Python package playwright is not installed")
    assert path is not None
    return path


@contextlib.contextmanager
def explore_server(*args: str) -> Iterator[str]:
    """``posenc explore --port 0 ARGS`` in a subprocess, as a user starts it; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "posenc", "explore", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    url = None
    try:
        while url is None:
            try:
                line = lines.get(timeout=120)
            except queue.Empty:
                break
            match = re.search(r"running at (http://\S+/)", line)
            if match:
                url = match.group(1).replace("localhost", "127.0.0.1")
        if url is None:
            pytest.fail(f"posenc explore did not report its address (exit code {proc.poll()})")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def headless_chromium(path: str, extra_args: Sequence[str] = ()) -> Iterator[object]:
    """A Playwright ``Browser`` on the given Chromium, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=[*CHROMIUM_ARGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()
