"""Columns by node key that the bridge's model of the engine keeps instead of dicts: a million-node graph's dict
costs ~40 B a node in its table alone, and an int or a tuple of its own per node more.

Imports neither torch nor the engine (model.py says why).
"""
from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from agdb.tracer.store.schema import UINT64_MAX

ABSENT = UINT64_MAX - 1
"""What SeqNrs holds for a key with no seq_nr: never one of torch's (its counters count up from 0 by ones; a node with
no number has UINT64_MAX)."""

class SeqNrs:
    """Node key -> seq_nr, as a column indexed by the key: for the bridge's keys, small ints handed out one by one
    (a dict of a million-node graph's seq_nrs costs ~84 B a node, the column 8). A key's seq_nr never changes
    (NOTE [node identity] in walk.py), so every graph the bridge walks shares one column; a key no walk gave a
    seq_nr reads as absent."""

    __slots__ = ("col",)

    def __init__(self) -> None:
        self.col = array("Q")  # ABSENT where no seq_nr was set

    def grow(self, key: int) -> None:
        """Make room up to `key` (at least doubling, so that a walk's appends cost O(1) each)."""
        col = self.col
        col.extend(array("Q", [ABSENT]) * max(key + 1 - len(col), len(col), 1024))

    def __setitem__(self, key: int, seq: int) -> None:
        if key >= len(self.col):
            self.grow(key)
        self.col[key] = seq

    def get(self, key: int, default: int | None = None) -> int | None:
        """The seq_nr of `key`, or `default` if none was set."""
        col = self.col
        seq = col[key] if 0 <= key < len(col) else ABSENT
        return default if seq == ABSENT else seq

    def __getitem__(self, key: int) -> int:
        seq = self.get(key)
        if seq is None:
            raise KeyError(key)
        return seq


class Edges:
    """Node key -> next edges as (child key or 0, input_nr) pairs, for one graph: a node with one next edge (every node
    of a deep chain) as two ints in columns by key, rather than a dict slot, a 1-tuple and a pair (~140 B a node of a
    million-node chain); the others in a dict. `of` makes one from what a walk found, or a plain dict of them all."""

    __slots__ = ("base", "child", "nr", "other")

    SPARSE = 4
    """Columns only for keys at most this many times as spread as they are many (a graph's keys mostly are dense)."""
    SMALLEST = 1024
    """Fewer one-edge nodes than this stay in a dict: its get, in C, costs the model's scheduling less than a method's
    (Counts too)."""

    @classmethod
    def of(cls, other: dict, keys: array, children: array, nrs: array) -> Edges | dict:
        """A walk's edges: `other` (node -> its edges, for nodes with other than one) and the nodes `keys`, each with
        one next edge (`children[i]`, `nrs[i]`); `other` itself, with them added, if they are few or spread out."""
        low, high = (min(keys), max(keys)) if keys else (0, 0)
        if len(keys) < cls.SMALLEST or high - low + 1 > cls.SPARSE * len(keys) + 1024 or min(children) < 0:
            for key, child, nr in zip(keys, children, nrs, strict=True):
                other[key] = ((child, nr),)
            return other
        at = np.frombuffer(keys, dtype=np.int64) - low
        child, nr = np.full(high - low + 1, -1, dtype=np.int64), np.zeros(high - low + 1, dtype=np.int64)
        child[at], nr[at] = np.frombuffer(children, dtype=np.int64), np.frombuffer(nrs, dtype=np.int64)
        made = cls()
        made.base, made.child, made.nr, made.other = low, array("q", child.tobytes()), array("q", nr.tobytes()), other
        return made

    def __init__(self) -> None:
        self.base = 0  # the key of column index 0
        self.child = array("q")  # by key - base: the one edge's child key (0: a null edge), or -1: see `other`
        self.nr = array("q")
        self.other: dict[int, tuple[tuple[int, int], ...]] = {}

    def get(self, key: int, default: Any = None) -> Any:
        """The next edges of node `key`, or `default`."""
        i = key - self.base
        if 0 <= i < len(self.child):
            child = self.child[i]
            if child >= 0:
                return ((child, self.nr[i]),)
        return self.other.get(key, default)

    def __getitem__(self, key: int) -> tuple[tuple[int, int], ...]:
        edges = self.get(key)
        if edges is None:
            raise KeyError(key)
        return edges

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def __setitem__(self, key: int, edges: tuple[tuple[int, int], ...]) -> None:
        i = key - self.base
        if 0 <= i < len(self.child):
            self.child[i] = -1
        self.other[key] = edges


class Counts:
    """Node key -> dependency count of one graph task, as scheduler.route reads, takes down and drops them: an array by
    key rather than the dict compute_dependencies makes (its table costs a million-node graph ~40 B a node). 0 is no
    count. `of` makes one from that dict, when its keys are dense enough."""

    __slots__ = ("base", "col")

    SMALLEST = Edges.SMALLEST
    """Fewer counts than this stay a dict."""

    @classmethod
    def of(cls, counts: dict[int, int], keys: np.ndarray | None = None, values: np.ndarray | None = None
           ) -> Counts | dict[int, int]:
        """`counts` as a Counts, or itself if it is small or its keys are spread out (or a count is not positive);
        `keys` and `values`: its keys and counts as arrays, if the caller has them already."""
        if len(counts) < cls.SMALLEST:
            return counts
        if keys is None or values is None:
            keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
            values = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
        low, high = int(keys.min()), int(keys.max())
        if high - low + 1 > Edges.SPARSE * len(counts) + 1024 or values.min() < 1:
            return counts
        col = np.zeros(high - low + 1, dtype=np.int64)
        col[keys - low] = values
        made = cls()
        made.base, made.col = low, array("q", col.tobytes())
        return made

    def __init__(self) -> None:
        self.base = 0
        self.col = array("q")

    def get(self, key: int, default: Any = None) -> Any:
        """The count of node `key`, or `default`."""
        i = key - self.base
        if 0 <= i < len(self.col):
            count = self.col[i]
            if count:
                return count
        return default

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def __setitem__(self, key: int, count: int) -> None:
        """A new count for a node that has one (route takes counts down; it never adds a node)."""
        i = key - self.base
        if not 0 <= i < len(self.col) or not self.col[i] or count < 1:
            raise KeyError(key)
        self.col[i] = count

    def __delitem__(self, key: int) -> None:
        i = key - self.base
        if not 0 <= i < len(self.col) or not self.col[i]:
            raise KeyError(key)
        self.col[i] = 0
