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
