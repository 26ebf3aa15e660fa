"""What the browser test modules share: finding Chromium, skipping (or failing in CI) without it,
serving ``posenc explore`` from a subprocess, launching the browser, and the page actions the lesson and
workbench tests use. The fixtures built on these (``chromium_path``, ``server``, ``browser``, ``page``,
``phone``, ``shots``) are in ``conftest.py``.

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


#: the two sizes every page-wide browser check runs at
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}


def new_page(browser, server: str, size: tuple[int, int]):
    """A fresh context and page at ``size``; ``page.problems`` collects what must not happen on it.

    A problem is an error thrown in the page, an error on its console, a failed request (but not one
    the page cancelled itself, as when a slider moves on before the answer came), an HTTP status of
    400 or more, and any request to another origin. Returns ``(context, page)``; close the context.
    """
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on(
        "requestfailed",
        lambda req: (
            problems.append(f"failed request: {req.url} ({req.failure})")
            if "ERR_ABORTED" not in (req.failure or "")
            else None
        ),
    )
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on(
        "request",
        lambda req: (
            problems.append(f"other origin: {req.url}")
            if not (req.url.startswith(server) or req.url.startswith("data:"))
            else None
        ),
    )
    page.problems = problems
    return context, page


@contextlib.contextmanager
def watched_page(browser, server: str, size: tuple[int, int]):
    """A fresh page at ``size`` (:func:`new_page`) for a ``with`` block; at the block's end the page must
    have had no problems, and its context is closed either way."""
    context, page = new_page(browser, server, size)
    try:
        yield page
        assert page.problems == [], page.problems
    finally:
        context.close()


def axe_serious(page, selector: str) -> list[str]:
    """axe-core's serious and critical violations inside ``selector``, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, context=selector)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def open_section(page, server: str, route: str, node_id: str):
    """Opens ``#route`` and waits until the view or chapter ``node_id`` has drawn and shows no error."""
    from playwright.sync_api import expect

    page.goto(f"{server}#{route}")
    node = page.locator(f"#{node_id}")
    expect(node).to_be_visible()
    expect(node).not_to_have_attribute("data-renders", "0", timeout=20_000)
    settled(node)
    expect(node.locator(".error").first).to_be_hidden()
    return node


def settled(node, timeout: float = 20_000):
    """Waits until every figure the view or chapter ``node`` was asked for is drawn: its ``data-pending``
    (core.js's loaders: asked and not yet drawn, debounces included) is back to 0."""
    from playwright.sync_api import expect

    expect(node).to_have_attribute("data-pending", "0", timeout=timeout)


def open_chapter(page, server: str, chapter: str):
    """Opens the lesson's chapter ``chapter`` by its URL hash and waits until it has drawn."""
    return open_section(page, server, chapter, f"ch-{chapter}")


def open_view(page, server: str, view: str):
    """Opens the workbench's view ``view`` by its URL hash and waits until it has drawn."""
    return open_section(page, server, view, f"view-{view}")


def renders(node) -> str:
    """How many times the view or chapter ``node`` has drawn (its ``data-renders``)."""
    return node.get_attribute("data-renders")


def after_change(node, before: str):
    """Waits until ``node`` has drawn again since it had drawn ``before`` times, and everything it was
    asked for since is drawn."""
    from playwright.sync_api import expect

    expect(node).not_to_have_attribute("data-renders", before)
    settled(node)


def value_of(page, selector: str) -> float:
    """The ``data-value`` of the element ``selector`` (the number a readout shows, unrounded)."""
    from playwright.sync_api import expect

    node = page.locator(selector)
    expect(node).to_be_attached()
    return float(node.get_attribute("data-value"))


def set_slider(page, node, selector: str, value):
    """Sets a range input and waits for the chapter to render the new value."""
    from playwright.sync_api import expect

    renders = node.get_attribute("data-renders")
    page.locator(selector).fill(str(value))
    expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
    settled(node)  # a second figure of the chapter may still be on its way


def select_and_wait(page, node, selector: str, value):
    """Chooses ``value`` in a select and waits for the chapter to render it."""
    from playwright.sync_api import expect

    renders = node.get_attribute("data-renders")
    page.locator(selector).select_option(value)
    expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
    settled(node)


def number(shown: str) -> float:
    """A number as the page prints it, with a true minus sign (−) and thousands separated by commas."""
    return float(shown.replace("−", "-").replace(",", ""))


def wrap(degrees: float) -> float:
    """``degrees`` folded into [-180, 180)."""
    return (degrees + 180.0) % 360.0 - 180.0


def hex_of(css: str) -> str:
    """``#rrggbb`` of a CSS colour as the browser reports it (``rgb(r, g, b)`` or ``#rrggbb``)."""
    css = css.strip().lower()
    if css.startswith("#"):
        return css
    r, g, b = (int(float(v)) for v in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"
