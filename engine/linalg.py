"""`engine.linalg`: the linear-algebra functions the engine has (vector_norm), passing through the dispatch point.

Imports the dispatch table only.
"""
from __future__ import annotations

from ._dispatch import table

globals().update(table("linalg"))
__all__ = list(table("linalg"))
