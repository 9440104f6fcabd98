"""Shared pytest setup: the hypothesis profile, and the order that lets the longest tests overlap the rest.

Importing the strategies module registers and loads the hypothesis profile. Tests marked `long` (tens of
seconds of one core or more) are moved to the front: under pytest-xdist (`make test` runs `-n auto`) they then
start at once while the other workers share the rest, instead of one of them starting last and keeping the run
going alone.
"""
from __future__ import annotations

import pytest

from tests import strategies  # noqa: F401  (registers and loads the "ci" / "dev" hypothesis profiles)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first, each group in collection order (the same on every xdist worker)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
