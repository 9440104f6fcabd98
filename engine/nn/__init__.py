"""`engine.nn`: only `functional` is provided."""
from __future__ import annotations

from . import functional

__all__ = ["functional"]
