"""Small numpy helpers the store's indexes and the replay share: sorted-key lookups, first positions, groups,
read-only arrays, without np.unique (NOTE [no np.unique on a step]).

Imports numpy only.
"""
from __future__ import annotations

import bisect

import numpy as np

NEVER = np.iinfo(np.int64).max
"""An end step that never comes (a run or buffer still open when the trace ends)."""


class Intervals:
    """Half-open step intervals [start, end); `open_at(step)` lists those containing a step, quickly.

    Intervals are kept in start order, with the set open at every `every`-th start remembered, so a
    query looks only at that set and at the intervals started since.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray, every: int = 4096) -> None:
        order = np.argsort(starts, kind="stable")
        self.order, self.starts, self.ends = order, starts[order], ends[order]
        self.marks: list[int] = []
        self.open: list[np.ndarray] = []
        # Each open set from the one before: marks only grow, so an interval closed at a mark stays closed
        # (rebuilding each from the start was quadratic: 0.35 s for the 1M intervals of a 1M-node trace).
        open_now, done = np.zeros(0, np.int64), 0
        for upto in range(every, len(order) + 1, every):
            mark = int(self.starts[upto - 1])
            candidates = np.concatenate([open_now, np.arange(done, upto)])
            open_now, done = candidates[self.ends[candidates] > mark], upto
            self.marks.append(mark)
            self.open.append(open_now)

    def open_at(self, step: int) -> np.ndarray:
        """Indices (into the arrays given) of the intervals with start <= step < end."""
        i = bisect.bisect_right(self.marks, step) - 1
        base = np.zeros(0, np.int64)
        lo = 0
        if i >= 0:
            base = self.open[i]
            lo = int(np.searchsorted(self.starts, self.marks[i], side="right"))
        hi = int(np.searchsorted(self.starts, step, side="right"))
        candidates = np.concatenate([base, np.arange(lo, hi)])
        return np.sort(self.order[candidates[self.ends[candidates] > step]])


def read_only(arr: np.ndarray) -> np.ndarray:
    """`arr` as an array that refuses writes (indexes and states are shared, never changed)."""
    arr = np.asarray(arr)
    arr.flags.writeable = False
    return arr


def groups(keys: np.ndarray) -> dict[int, np.ndarray]:
    """Positions of each distinct key, each in ascending order: one sort (none if in order), not a scan per key."""
    order = stable_order(keys)
    if order is None:
        order = np.arange(len(keys))
    sk = keys[order]
    cuts = np.flatnonzero(sk[1:] != sk[:-1]) + 1
    return {int(sk[lo]): order[lo:hi] for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(sk)].tolist(),
                                                         strict=True) if hi > lo}


def cut(steps: np.ndarray, upto: int | None) -> np.ndarray:
    """The steps up to `upto` (all with None) of a sorted array of steps."""
    return steps if upto is None else steps[:int(np.searchsorted(steps, upto, side="right"))]


def as_keys_of(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """`keys` in the dtype of `sorted_keys` when they fit it: searchsorted casts the sorted array to a wider dtype
    of the keys, a copy of all of it (1.2 ms for a 1M-node task's int32 nodes) at every search."""
    info = np.iinfo(sorted_keys.dtype)
    if keys.dtype == sorted_keys.dtype or (len(keys) and (keys.min() < info.min or keys.max() > info.max)):
        return keys
    return keys.astype(sorted_keys.dtype)


def unique_first(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct key ascending, the position of its first occurrence): np.unique(keys, return_index=True).

    NOTE [no np.unique on a step]: numpy 2's np.unique imports numpy.ma on its first call, ~20 ms that a step
    would pay (the first step into a backward called it first); a stable sort gives the same answer.
    """
    keys = np.asarray(keys)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    firsts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(keys) else np.zeros(0, np.int64)
    return ordered[firsts], order[firsts]


def unique_sorted(keys: np.ndarray) -> np.ndarray:
    """np.unique(keys), without importing numpy.ma (NOTE [no np.unique on a step])."""
    ordered = np.sort(np.asarray(keys))
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def lookup_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of each key in sorted_keys, whether it is there)."""
    pos = np.searchsorted(sorted_keys, keys)
    if not len(sorted_keys):
        return pos, np.zeros(len(keys), bool)
    return pos, (pos < len(sorted_keys)) & (sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] == keys)


def stable_order(key: np.ndarray) -> np.ndarray | None:
    """The stable sorting order of `key`, or None when it is sorted already (one thread, runs that do not nest:
    a 1M-node trace's sorts cost 0.1 s and most are identities)."""
    if len(key) < 2 or bool((key[1:] >= key[:-1]).all()):
        return None
    return np.argsort(key, kind="stable")


def first_positions(keys: np.ndarray, size: int) -> np.ndarray:
    """For each key 0..size-1, the first position in `keys` that holds it, or -1 (keys < size; negative keys are
    skipped).

    np.minimum.at visits every position once with no sort: 5 ms for 1M events, where
    np.unique(return_index=True) sorted them in 20-170 ms.
    """
    keys = np.asarray(keys)
    where = np.flatnonzero(keys >= 0)
    none = np.iinfo(np.int64).max
    first = np.full(size, none, dtype=np.int64)
    np.minimum.at(first, keys[where], where)
    first[first == none] = -1
    return first
