"""Fixtures shared by the Pilot tests of the TUI."""
from __future__ import annotations

import pytest

from agdb.app.demo import record_example


@pytest.fixture(scope="module")
def demo_trace():
    """The built-in example's trace, recorded once per test module."""
    return record_example()
