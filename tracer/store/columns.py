"""What the store's readers take of a Trace: a Protocol, so that the indexes and leaf labels a Trace builds for
itself (store/trace.py) need not import it.

Imports numpy only.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np


class TraceColumns(Protocol):
    """A Trace as its derived indexes read it: the columns, the string table, meta and the node table."""

    columns: dict[str, np.ndarray]
    strings: tuple[str, ...]
    meta: dict

    @property
    def num_nodes(self) -> int: ...

    @property
    def index(self) -> Any: ...  # the trace's TraceIndex (store/indexes.py), which reads this protocol

    def nodes_named(self, wanted: Callable[[str], bool]) -> np.ndarray: ...

    def created_steps(self) -> np.ndarray: ...
