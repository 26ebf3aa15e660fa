"""Fixtures of the rope tests beyond the suite's own (``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from posenc.rope.kernels import cpu


@pytest.fixture
def fresh_kernel_state():
    """The CPU kernel forgotten before and after the test, so it builds or refuses again."""
    cpu.reset()
    yield
    cpu.reset()


@pytest.fixture
def broken_compiler(tmp_path, monkeypatch):
    """$CC is a compiler that fails with "cc: fatal error: broken on purpose"; the kernel cache is
    an empty folder under ``tmp_path``."""
    broken = tmp_path / "cc"
    broken.write_text("#!/bin/sh\necho 'cc: fatal error: broken on purpose' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(broken))
    return broken
