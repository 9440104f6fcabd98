"""`engine.nn`: only `functional` is provided.

Imports numpy and the standard library only.
"""
from __future__ import annotations

from . import functional

__all__ = ["functional"]
