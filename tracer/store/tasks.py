"""One graph task's index (TaskIndex) and its dependency counts at a step (RemainingSnaps, TaskCounts, WindowIndex:
NOTE [counts at a step]).

Imports numpy and the store's helpers only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from agdb.tracer.store.arrays import NEVER, Intervals, as_keys_of, lookup_sorted, read_only

SNAP = 16384
"""Remaining-count snapshots every this many decrements bound a seek's work."""


class TaskIndex:
    """What never changes about one graph task of a trace, plus its event indices."""

    def __init__(self) -> None:
        self.start, self.end, self.depth, self.min_topo = 0, NEVER, 0, 0
        self.dep_nodes = np.zeros(0, np.int32)  # int32: half the bytes a step copies (NOTE [fresh memory])
        self.dep_counts = np.zeros(0, np.int32)
        self.dec_steps = np.zeros(0, np.int64)  # steps at which one parent edge of dec_nodes was routed
        self.dec_nodes = np.zeros(0, np.int64)
        self.dec_pos = np.zeros(0, np.int64)  # index of each dec_nodes entry in dep_nodes
        self.remaining_snaps: Any = ()  # [k-1]: dep_counts minus the first k*SNAP decrements (RemainingSnaps)
        self.buf_nodes = np.zeros(0, np.int64)  # nodes that got a BufferWritten, with when their buffer
        self.buffers = Intervals(np.zeros(0, np.int64), np.zeros(0, np.int64))  # opened and was pushed
        self.pruned: tuple = ()
        self.needed: tuple = ()
        self.captured: tuple = ()


class RemainingSnaps:
    """A task's dependency counts after every SNAP-th decrement, each computed when first asked for.

    `[i]` is dep_counts minus the first (i+1)*SNAP decrements. Made up front, a 1M-node backward's would be
    61 arrays of 1M counts (0.25 GB, 0.4 s before the TUI's first paint); a replay asks for the few near the
    steps it shows. Each is computed from the nearest one below already made.
    """

    def __init__(self, t: TaskIndex) -> None:
        self._t = t
        self._made: dict[int, np.ndarray] = {}
        self._windows: dict[int, WindowIndex] = {}

    def __len__(self) -> int:
        return len(self._t.dec_pos) // SNAP

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self):
            raise IndexError(i)
        made = self._made.get(i)
        if made is None:
            t = self._t
            below = max((j for j in self._made if j < i), default=-1)
            base = self._made[below] if below >= 0 else t.dep_counts
            step = t.dec_pos[(below + 1) * SNAP:(i + 1) * SNAP]
            made = self._made[i] = (base - np.bincount(step, minlength=len(t.dep_nodes))).astype(np.int32)
        return made

    def window(self, i: int) -> WindowIndex:
        """The index of the decrements after snapshot i - 1 (after none: i = 0), made once (TaskCounts)."""
        found = self._windows.get(i)
        if found is None:
            t = self._t
            found = self._windows[i] = WindowIndex(self[i - 1] if i else t.dep_counts,
                                                   t.dec_pos[i * SNAP:(i + 1) * SNAP])
        return found


class TaskCounts:
    """The remaining dependency counts of one graph task at one step, read without a count per node.

    NOTE [counts at a step]: the counts at a step are a snapshot's (RemainingSnaps, or the initial dep_counts)
    minus the first m decrements of the window after it (fewer than SNAP). Made whole, they are an array of every
    node the task counts (a 1M-node backward's: 4 MB copied, decremented and masked at every step, ~2 ms, and as
    much again in each view that reads them). The views read a screenful: `counts_of` the nodes shown, `rows` a
    slice of the counted nodes in node order, `num_counted`. Each window is indexed once (WindowIndex), so these
    cost a few binary searches, not what the task or the window holds. `arrays()` still makes the whole (for
    export, JSON and equality), once per state.
    """

    def __init__(self, t: TaskIndex, done: int) -> None:
        self._t, self._done = t, done
        self._snap = done // SNAP
        self._m = done - self._snap * SNAP  # decrements of the window counted
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._window: WindowIndex | None = None

    def _base(self) -> np.ndarray:
        return self._t.remaining_snaps[self._snap - 1] if self._snap else self._t.dep_counts

    def _index(self) -> WindowIndex:
        if self._window is None:
            self._window = self._t.remaining_snaps.window(self._snap)
        return self._window

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, counts) of every node still counted, by node, read-only."""
        if self._arrays is None:
            t = self._t
            counts = self._base().astype(np.int32)  # a copy
            # In place: a bincount would allocate a count per node (NOTE [fresh memory] in replay). The 1 must be an
            # int32 like the counts: with a Python int, ufunc.at leaves its fast path and is 30x slower.
            np.subtract.at(counts, t.dec_pos[self._snap * SNAP:self._done], np.int32(1))
            live = counts > 0
            self._arrays = read_only(t.dep_nodes[live]), read_only(counts[live])
        return self._arrays

    def nbytes(self) -> int:
        """Bytes this holds of its own (the snapshots and window indexes it reads are the task index's)."""
        return sum(a.nbytes for a in self._arrays) if self._arrays is not None else 0

    def num_counted(self) -> int:
        """How many nodes the task still counts (a count above 0)."""
        if self._arrays is not None:
            return len(self._arrays[0])
        return self._index().num_counted(self._m)

    def counted_span(self) -> tuple[int, int, np.ndarray] | None:
        """(lo, hi, holes) when the task counts a range of nodes lo..hi-1, all but the nodes `holes` still counted:
        a view sets a range of nodes at memory speed where a scatter to a million nodes takes ~8 ms. None when
        the task's nodes are not a range."""
        nodes = self._t.dep_nodes
        if not len(nodes) or int(nodes[-1]) - int(nodes[0]) + 1 != len(nodes):
            return None
        return int(nodes[0]), int(nodes[-1]) + 1, self._index().uncounted(self._m) + int(nodes[0])

    def _counts_at(self, pos: np.ndarray) -> np.ndarray:
        """The counts at these positions of dep_nodes."""
        return self._base()[pos].astype(np.int64) - self._index().decrements(pos, self._m)

    def counts_of(self, nodes: np.ndarray) -> np.ndarray:
        """The remaining count of each node (0 for a node the task does not count, or no longer)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        pos, ok = lookup_sorted(self._t.dep_nodes, as_keys_of(self._t.dep_nodes, nodes))
        out = np.zeros(len(nodes), dtype=np.int64)
        if ok.any():
            out[ok] = np.maximum(self._counts_at(pos[ok]), 0)
        return out

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, counts) of the counted nodes lo..hi-1 in node order (rows of `arrays()`), without making them all."""
        hi = min(hi, self.num_counted())
        if hi <= lo:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if self._arrays is not None:
            nodes, counts = self._arrays
            return nodes[lo:hi].astype(np.int64), counts[lo:hi].astype(np.int64)
        pos = self._index().select(np.arange(lo, hi), self._m)
        return self._t.dep_nodes[pos].astype(np.int64), self._counts_at(pos)


class WindowIndex:
    """The decrements of one window (those after a snapshot, at most SNAP), indexed so that the counts after its
    first m decrements are read by binary search for any m (TaskCounts).

    The snapshot's counted positions are kept as their complement while few are not counted (the first window of
    a backward: none), so that a 1M-node task does not make an 8 MB array of a million positions; else as
    themselves.
    """

    DEAD_MAX = 1 << 16
    """Positions not counted in the snapshot, at most, for the complement to be kept."""

    def __init__(self, base: np.ndarray, window: np.ndarray) -> None:
        counted = base > 0
        self.size = len(base)
        self.live: np.ndarray | None = None  # positions the snapshot counts, ascending (or None: see dead)
        self.dead: np.ndarray | None = None  # the others, ascending, when there are few
        if self.size - int(np.count_nonzero(counted)) <= self.DEAD_MAX:
            self.dead = read_only(np.flatnonzero(~counted))
        else:
            self.live = read_only(np.flatnonzero(counted))
        order = np.argsort(window, kind="stable")
        pos = window[order].astype(np.int64)
        self._keys = pos * (len(window) + 1) + order  # by position, then by place in the window
        self._width = len(window) + 1
        # Where each position's count reaches 0: its base-th decrement in the window, if it has that many.
        firsts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]]) if len(pos) else np.zeros(0, np.int64)
        times = np.diff(np.r_[firsts, len(pos)])
        start = base[pos[firsts]].astype(np.int64)
        zeroes = (start > 0) & (times >= start)
        at = order[firsts[zeroes] + start[zeroes] - 1]
        by_time = np.argsort(at, kind="stable")
        self._zero_at = at[by_time]  # ascending: the m past which each of these positions is gone
        gone = pos[firsts[zeroes]][by_time]
        # What _excluded keeps sorted: gone positions among the dead ones, or gone ranks among the live ones.
        self._gone_keys = gone if self.live is None else np.searchsorted(self.live, gone)
        first = self.dead.astype(np.int64) if self.dead is not None else np.zeros(0, np.int64)
        self._sorted: tuple[int, np.ndarray] = (0, first)  # _excluded's last answer

    def num_counted(self, m: int) -> int:
        """How many positions are counted after the first m decrements."""
        live = len(self.live) if self.live is not None else self.size - len(self.dead)
        return live - self.gone_by(m)

    def decrements(self, pos: np.ndarray, m: int) -> np.ndarray:
        """How many of the window's first m decrements hit each position."""
        base = pos.astype(np.int64) * self._width
        return np.searchsorted(self._keys, base + m) - np.searchsorted(self._keys, base)

    def gone_by(self, m: int) -> int:
        """How many snapshot-counted positions the first m decrements took to 0."""
        return int(np.searchsorted(self._zero_at, m))

    def _excluded(self, m: int) -> np.ndarray:
        """Ascending: the positions not counted after the first m decrements (complement kept), or the ranks among
        `live` of those the decrements took to 0. Stepping on inserts a few into the last answer."""
        k = self.gone_by(m)
        done, keys = self._sorted
        if k == done:
            return keys
        if k > done:
            more = np.sort(self._gone_keys[done:k])
            keys = np.insert(keys, np.searchsorted(keys, more), more)
        else:
            first = [self.dead] if self.dead is not None else []
            keys = np.sort(np.concatenate([*first, self._gone_keys[:k]]).astype(np.int64))
        self._sorted = (k, keys)
        return keys

    def select(self, rows: np.ndarray, m: int) -> np.ndarray:
        """The positions of these rows (ascending indexes among the positions counted after m decrements)."""
        skip = self._excluded(m)
        before = skip - np.arange(len(skip))  # rows before each skipped one
        at = rows + np.searchsorted(before, rows, side="right")
        return at if self.live is None else self.live[at]

    def uncounted(self, m: int) -> np.ndarray:
        """Every position not counted after the first m decrements, ascending."""
        if self.live is None:
            return self._excluded(m)
        out = np.ones(self.size, dtype=bool)
        out[self.live] = False
        out[self.live[self._excluded(m)]] = True
        return np.flatnonzero(out)
