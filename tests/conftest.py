"""Shared pytest setup: importing the strategies module registers and loads the hypothesis profile."""
from tests import strategies  # noqa: F401  (registers and loads the "ci" / "dev" hypothesis profiles)
