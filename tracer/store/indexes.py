"""TraceIndex: the derived indexes of one Trace (kind steps, first mentions, node runs, graph tasks, buffers),
built when first asked and owned here alone.

Never imports the engine, textual or rich. Every index is read-only once built.
"""
from __future__ import annotations

import bisect
import copy
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from agdb.tracer.store.schema import Kind

if TYPE_CHECKING:
    from agdb.tracer.store.trace import Trace

NEVER = np.iinfo(np.int64).max
"""An end step that never comes (a run or buffer still open when the trace ends)."""
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


def _groups(keys: np.ndarray) -> dict[int, np.ndarray]:
    """Positions of each distinct key, each in ascending order: one sort (none if in order), not a scan per key."""
    order = _stable_order(keys)
    if order is None:
        order = np.arange(len(keys))
    sk = keys[order]
    cuts = np.flatnonzero(sk[1:] != sk[:-1]) + 1
    return {int(sk[lo]): order[lo:hi] for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(sk)].tolist(),
                                                         strict=True) if hi > lo}


def index_tasks(trace: Trace) -> dict[int, TaskIndex]:
    """Per graph task: its span and initial counts; `index_flows` adds routing decrements and buffer lifetimes.

    Work is linear in the events whatever the number of graph tasks: a training loop's trace holds
    thousands of small backward calls.
    """
    c = trace.columns
    tasks_col = c["ev_task"]
    index = trace.index
    tasks: dict[int, TaskIndex] = {}
    for row, s in enumerate(index.steps_of(Kind.GRAPH_TASK_STARTED).tolist()):  # side rows follow step order
        t = tasks.setdefault(int(tasks_col[s]), TaskIndex())
        t.start, t.depth = s, int(c["task_depth"][row])
    for s in index.steps_of(Kind.GRAPH_TASK_FINISHED).tolist():
        tasks.setdefault(int(tasks_col[s]), TaskIndex()).end = s
    # Read from the columns: decoding the DependenciesComputed event would make a tuple of 100k pairs.
    deps_start, deps_node, deps_count = c["deps_start"], c["deps_node"], c["deps_count"]
    for row, s in enumerate(index.steps_of(Kind.DEPENDENCIES_COMPUTED).tolist()):  # side rows follow step order
        t = tasks.setdefault(int(tasks_col[s]), TaskIndex())
        lo, hi = int(deps_start[row]), int(deps_start[row + 1])
        nodes = np.asarray(deps_node[lo:hi], dtype=np.int32)
        by_node = np.argsort(nodes, kind="stable")
        t.dep_nodes, t.dep_counts = nodes[by_node], np.asarray(deps_count[lo:hi], dtype=np.int32)[by_node]
        plo, phi = int(c["pruned_start"][row]), int(c["pruned_start"][row + 1])
        t.min_topo, t.pruned = int(c["ev_b"][s]), tuple(c["pruned_node"][plo:phi].tolist())
    for row, s in enumerate(index.steps_of(Kind.EXEC_INFO_COMPUTED).tolist()):
        t = tasks.setdefault(int(tasks_col[s]), TaskIndex())
        lo, hi = int(c["needed_start"][row]), int(c["needed_start"][row + 1])
        t.needed = tuple(c["needed_node"][lo:hi].tolist())
        lo, hi = int(c["captured_start"][row]), int(c["captured_start"][row + 1])
        t.captured = tuple(c["captured_node"][lo:hi].tolist())
    return tasks


def index_flows(trace: Trace, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
    """Fill in each task's routing decrements and buffer lifetimes (TaskIndex.dec_*, buf_nodes, buffers).

    Apart from `index_tasks` (NOTE [lazy task flows]): only a step inside a graph task needs them. With `upto`,
    only the events up to that step are read: the result is right for the steps up to it (NOTE [prefix indexes]).
    """
    _index_routing(trace, tasks, upto)
    _index_buffers(trace, tasks, upto)
    for t in tasks.values():
        if not isinstance(t.remaining_snaps, RemainingSnaps):  # no decrement: the snapshots still say what is live
            t.remaining_snaps = RemainingSnaps(t)


def _cut(steps: np.ndarray, upto: int | None) -> np.ndarray:
    """The steps up to `upto` (all with None) of a sorted array of steps."""
    return steps if upto is None else steps[:int(np.searchsorted(steps, upto, side="right"))]


def _as_keys_of(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
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


def _index_routing(trace: Trace, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
    """Each task's decrements: one per edge of a finished node to a node the task counts."""
    c = trace.columns
    finished = trace.index.steps_upto(upto, Kind.NODE_FINISHED)
    starts = np.asarray(c["node_edge_start"], dtype=np.int64)
    fin_nodes = np.asarray(c["ev_node"][finished], dtype=np.int64)
    counts = starts[fin_nodes + 1] - starts[fin_nodes]
    rep_steps = np.repeat(finished, counts)
    rep_tasks = np.repeat(np.asarray(c["ev_task"][finished], dtype=np.int64), counts)
    within = np.arange(len(rep_steps)) - np.repeat(np.cumsum(counts) - counts, counts)
    child = np.asarray(c["edge_child"][np.repeat(starts[fin_nodes], counts) + within], dtype=np.int64)
    valid = child >= 0
    rep_steps, rep_tasks, child = rep_steps[valid], rep_tasks[valid], child[valid]
    # The engine only decrements counted nodes: look each (task, child) up among every task's counted nodes,
    # keyed task * width + node, which sorts by task and then by node as dep_nodes is.
    width = trace.num_nodes + 1
    ids = sorted(tasks)
    if len(child) * 8 < width:  # a prefix of a large trace: search each task's counted nodes, touch nothing else
        _few_decrements(tasks, rep_steps, rep_tasks, child)
        return
    keys = rep_tasks * width + child
    first_of = dict(zip(ids, np.cumsum([0] + [len(tasks[tid].dep_nodes) for tid in ids]).tolist(), strict=False))
    size = (max([*ids, int(rep_tasks.max(initial=0))]) + 1) * width
    if size <= DENSE:  # a slot per (task, node): its position among the counted nodes of all tasks, or -1
        slots = np.full(size, -1, dtype=np.int64)
        for tid in ids:
            lo, nodes = first_of[tid], tasks[tid].dep_nodes.astype(np.int64)
            slots[tid * width + nodes] = np.arange(lo, lo + len(nodes))
        pos = slots[keys]
        ok = pos >= 0
    else:
        counted = np.concatenate([tid * width + tasks[tid].dep_nodes.astype(np.int64) for tid in ids] +
                                 [np.zeros(0, np.int64)])
        pos, ok = lookup_sorted(counted, keys)
    picked_all = np.flatnonzero(ok)
    for tid, where in _groups(rep_tasks[picked_all]).items():
        t = tasks[tid]
        picked = picked_all[where]  # in step order: _groups keeps positions ascending
        t.dec_steps, t.dec_nodes = rep_steps[picked], child[picked]
        t.dec_pos = pos[picked] - first_of[tid]
        t.remaining_snaps = RemainingSnaps(t)


def _few_decrements(tasks: dict[int, TaskIndex], steps: np.ndarray, task_of: np.ndarray, child: np.ndarray) -> None:
    """_index_routing's result by a binary search of each edge's child among its task's counted nodes: for few
    edges, where the other ways' arrays of one slot per node would cost more than the search."""
    for tid, where in _groups(task_of).items():
        t = tasks.get(tid)
        if t is None:
            continue
        pos, ok = lookup_sorted(t.dep_nodes, child[where].astype(t.dep_nodes.dtype))
        picked = where[ok]  # in step order: _groups keeps positions ascending
        t.dec_steps, t.dec_nodes, t.dec_pos = steps[picked], child[picked], pos[ok].astype(np.int64)
        t.remaining_snaps = RemainingSnaps(t)


DENSE = 1 << 22
"""Keys task * (nodes + 1) + node below this: the task indexes use an array slot per key and no sort. A single
backward's fit (tasks are numbered 1, 2, ...); a training loop's thousands of graph tasks do not, and are sorted."""


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
        pos, ok = lookup_sorted(self._t.dep_nodes, _as_keys_of(self._t.dep_nodes, nodes))
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


def _index_buffers(trace: Trace, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
    """Per task, the nodes whose input buffer was written, open from their first write to their first push."""
    c = trace.columns
    index = trace.index
    width = trace.num_nodes + 1
    writes = index.steps_upto(upto, Kind.BUFFER_WRITTEN)
    pushes = index.steps_upto(upto, Kind.TASK_PUSHED)
    w_keys = np.asarray(c["ev_task"][writes], dtype=np.int64) * width + c["ev_node"][writes]
    p_keys = np.asarray(c["ev_task"][pushes], dtype=np.int64) * width + c["ev_node"][pushes]
    size = int(max(w_keys.max(initial=-1), p_keys.max(initial=-1))) + 1
    # First positions by key, with no sort; but a few keys (a prefix's) sort faster than a slot per key is filled.
    if size <= DENSE and (len(w_keys) + len(p_keys)) * 8 >= size:
        first_write = first_positions(w_keys, size)
        uniq = np.flatnonzero(first_write >= 0)  # each (task, node) written, and its first write
        first = first_write[uniq]
        first_push = first_positions(p_keys, size)[uniq]  # each of them pushed, and its first push
        pushed = np.where(first_push >= 0, pushes[np.maximum(first_push, 0)], NEVER) if len(pushes) else \
            np.full(len(uniq), NEVER, dtype=np.int64)
    else:
        uniq, first = unique_first(w_keys)  # each (task, node) written, and its first write
        p_uniq, p_first = unique_first(p_keys)  # each (task, node) pushed, and its first push
        pos, ok = lookup_sorted(p_uniq, uniq)
        pushed = np.full(len(uniq), NEVER, dtype=np.int64)
        pushed[ok] = pushes[p_first[pos[ok]]]
    for tid, where in _groups(uniq // width).items():
        t = tasks.get(tid)
        if t is not None:
            t.buf_nodes = uniq[where] % width
            t.buffers = Intervals(writes[first[where]], pushed[where])


def find_runs(trace: Trace, upto: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, thread, node) of every node execution; end is its NodeFinished or ErrorRaised. With `upto`,
    of the runs started by that step, ends after it read as NEVER (NOTE [prefix indexes])."""
    c = trace.columns
    kinds = c["ev_kind"]
    if not len(trace.index.steps_upto(upto, Kind.ERROR_RAISED)):
        found = _index_runs_nested(trace, upto)
        if found is not None:
            return found
    steps = trace.index.steps_upto(upto, Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.ERROR_RAISED)
    open_runs: dict[int, list] = {}
    starts, ends, threads, nodes = [], [], [], []
    for s in steps.tolist():
        kind, thread = int(kinds[s]), int(c["ev_thread"][s])
        stack = open_runs.setdefault(thread, [])
        if kind == Kind.NODE_STARTED:
            stack.append(len(starts))
            starts.append(s)
            ends.append(NEVER)
            threads.append(thread)
            nodes.append(int(c["ev_node"][s]))
        elif stack:
            ends[stack.pop()] = s
    return (np.array(starts, np.int64), np.array(ends, np.int64), np.array(threads, np.int64),
            np.array(nodes, np.int64))


def _index_runs_nested(trace: Trace, upto: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """find_runs, vectorised, for a trace whose runs nest properly on each thread (no errors); else None.

    On one thread, a run's NodeFinished is the next end event at the run's own nesting level, so sorting the
    events by (thread, level, step) puts each start right before its end.
    """
    c = trace.columns
    kinds = c["ev_kind"]
    steps = trace.index.steps_upto(upto, Kind.NODE_STARTED, Kind.NODE_FINISHED)
    threads = np.asarray(c["ev_thread"][steps], dtype=np.int64)
    by_thread = _stable_order(threads)  # steps_of is in step order: stable keeps it per thread
    if by_thread is not None:
        steps, threads = steps[by_thread], threads[by_thread]
    is_start = kinds[steps] == Kind.NODE_STARTED
    total = np.cumsum(np.where(is_start, 1, -1))
    first = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1]]) if len(steps) else np.zeros(0, np.int64)
    offsets = np.where(first > 0, total[np.maximum(first - 1, 0)], 0)
    depth = total - np.repeat(offsets, np.diff(np.r_[first, len(steps)]))
    if len(depth) and depth.min() < 0:
        return None  # an end with no run open: leave it to the general loop
    level = np.where(is_start, depth, depth + 1)
    # By (thread, level, step): events are by thread, then step, already, so one stable sort of a joint key.
    order = _stable_order(threads * (int(level.max(initial=0)) + 2) + level)
    if order is None:
        s_steps, s_start, s_level, s_thread = steps, is_start, level, threads
    else:
        s_steps, s_start, s_level, s_thread = steps[order], is_start[order], level[order], threads[order]
    n = len(steps)
    nxt = np.arange(1, n + 1)
    has_next = nxt < n
    nxt = np.minimum(nxt, max(n - 1, 0))
    closes = has_next & ~s_start[nxt] & (s_level[nxt] == s_level) & (s_thread[nxt] == s_thread)
    starts = s_steps[s_start]
    ends = np.where(closes, s_steps[nxt], NEVER)[s_start]
    run_threads = s_thread[s_start]
    by_start = _stable_order(starts)
    if by_start is not None:
        starts, ends, run_threads = starts[by_start], ends[by_start], run_threads[by_start]
    nodes = np.asarray(c["ev_node"][starts], dtype=np.int64)
    return starts.astype(np.int64), ends.astype(np.int64), run_threads, nodes


def _stable_order(key: np.ndarray) -> np.ndarray | None:
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


class TraceIndex:
    """The derived indexes of one Trace, each built on first use and then kept (read-only)."""

    def __init__(self, trace: Trace) -> None:
        self._trace = trace
        self._steps_of: dict[tuple[int, ...], np.ndarray] = {}
        self._kind_before: dict[int, bool] = {}  # kind -> whether one comes before the first graph task
        self._memo: dict[Any, Any] = {}
        self._flows_lock = threading.Lock()
        self._flows_done = False  # NOTE [lazy task flows]
        self._flows_part: tuple[int, dict[int, TaskIndex]] | None = None  # (bound, tasks): NOTE [prefix indexes]
        self._runs_full: tuple[tuple, Intervals] | None = None
        self._runs_part: tuple[int, tuple, Intervals] | None = None

    def steps_of(self, *kinds: Kind) -> np.ndarray:
        """The steps of every event of these kinds, in order."""
        key = tuple(sorted(int(k) for k in kinds))
        found = self._steps_of.get(key)
        if found is None:
            k = self._trace.columns["ev_kind"]
            mask = k == key[0]
            for other in key[1:]:
                mask |= k == other
            found = self._steps_of[key] = read_only(np.flatnonzero(mask))
        return found

    def steps_upto(self, upto: int | None, *kinds: Kind) -> np.ndarray:
        """The steps up to `upto` (all with None) of every event of these kinds, in order.

        Does not build `steps_of` for the whole trace (a 7M-event trace's costs ~10 ms a kind): a prefix index
        (NOTE [prefix indexes]) reads only from the first graph task to its bound, unless one of these kinds
        occurs before the first graph task too.
        """
        key = tuple(sorted(int(k) for k in kinds))
        found = self._steps_of.get(key)
        if found is not None or upto is None:
            return _cut(self.steps_of(*kinds), upto)
        lo = 0 if self._before_backward(key) else min(self.first_backward, upto + 1)
        window = self._trace.columns["ev_kind"][lo:upto + 1]
        mask = window == key[0]
        for other in key[1:]:
            mask |= window == other
        return read_only(np.flatnonzero(mask) + lo)

    def _before_backward(self, kinds: tuple[int, ...]) -> bool:
        """Whether an event of one of these kinds comes before the first graph task starts (each kind looked for
        once: one comparison over the forward's events, ~0.1 ms, where counting every kind took 6 ms)."""
        found = self._kind_before
        for kind in kinds:
            if kind not in found:
                found[kind] = bool((self._trace.columns["ev_kind"][:self.first_backward] == kind).any())
        return any(found[kind] for kind in kinds)

    def rank(self, step: int, *kinds: Kind) -> int:
        """Which event of these kinds `step` is (0 for the first): the row of its side data."""
        key = tuple(sorted(int(k) for k in kinds))
        if key not in self._steps_of and step - self.first_backward < self.PREFIX_MIN and \
                not self._before_backward(key):
            return len(self.steps_upto(step - 1, *kinds))  # early in the backward: NOTE [prefix indexes]
        return int(np.searchsorted(self.steps_of(*kinds), step))

    @cached_property
    def created_steps(self) -> np.ndarray:
        """The step each node was made at: its NodeCreated, or its first mention."""
        c = self._trace.columns
        return read_only(first_positions(c["ev_node"], len(c["node_name"])))

    @cached_property
    def distinct_names(self) -> list[int]:
        """The string ids of the node names, ascending: a few dozen, even for 100k nodes."""
        # Ids index `strings`, so a bincount finds them in one pass (np.unique would sort or hash: ~70 us
        # for 1k nodes, a tenth of drawing them).
        ids = self._trace.columns["node_name"]
        present = np.bincount(ids, minlength=len(self._trace.strings)) if len(ids) else np.zeros(0, np.int64)
        return np.flatnonzero(present).tolist()

    @cached_property
    def leaf_labels(self) -> dict[int, str]:
        """What tells each AccumulateGrad apart (tracer.store.leaf_labels): its leaf's name, or `leaf N`."""
        from agdb.tracer.store.leaf_labels import leaf_labels

        return leaf_labels(self._trace)

    @cached_property
    def task_depths(self) -> dict[int, int]:
        """The reentrant depth of each graph task."""
        c = self._trace.columns
        return {int(c["ev_task"][s]): int(c["task_depth"][row])
                for row, s in enumerate(self.steps_of(Kind.GRAPH_TASK_STARTED).tolist())}

    @cached_property
    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, thread, node) of every node execution, by start; end is NEVER for a run still open."""
        return tuple(read_only(a) for a in find_runs(self._trace))  # type: ignore[return-value]

    @cached_property
    def tasks(self) -> dict[int, TaskIndex]:
        """Per graph task: span, depth, initial counts, pruning and exec_info (see TaskIndex). The decrements and
        buffers are empty until `task_flows()` fills them in (NOTE [lazy task flows])."""
        return index_tasks(self._trace)

    # NOTE [lazy task flows]: a 1M-node backward's routing decrements and buffer lifetimes take 0.25-0.5 s to
    # index, and the TUI first shows step 0, usually in the forward pass, where no graph task is running. So
    # `tasks` holds what every step needs (the spans) and `task_flows()` adds the rest when a step inside a
    # graph task is first asked for, or when the TUI's worker warms the replay after the first paint.
    #
    # NOTE [prefix indexes]: the state at a step is a function of the events up to it, so an index built from a
    # prefix of the trace answers every step of that prefix. The first step into a 1M-node backward (the first
    # `n` after the first paint) would otherwise wait ~0.4 s for the task flows, the runs and the node states'
    # history of the whole trace; built from the events up to a bound, they cost what that prefix holds. A
    # step past the bound builds a prefix twice as deep into the backward (so all the prefixes together cost at
    # most twice the whole); once the bound would pass the middle of the backward, or the TUI's worker has
    # built the whole index, the whole one is used. The prefixes are new objects: whole indexes never change.
    PREFIX_MIN = 1 << 15
    """Events past the first graph task's start that the smallest prefix covers."""

    @cached_property
    def first_backward(self) -> int:
        """The step of the first GraphTaskStarted, or the trace's length: before it no graph task has run."""
        started = self.steps_of(Kind.GRAPH_TASK_STARTED)
        return int(started[0]) if len(started) else len(self._trace)

    def prefix_bound(self, step: int) -> int | None:
        """The last step of the prefix whose indexes should answer `step`, or None to use the whole trace's."""
        first, n = self.first_backward, len(self._trace)
        bound = first + max(2 * (step - first), self.PREFIX_MIN)
        return bound if bound < first + (n - first) // 2 else None

    def task_flows(self, step: int | None = None) -> dict[int, TaskIndex]:
        """`tasks` with every task's decrements and buffers filled in (built once, by one thread); with `step`,
        perhaps a copy filled in from a prefix that holds `step` (NOTE [prefix indexes])."""
        return self.task_flows_upto(step)[0]

    def task_flows_upto(self, step: int | None = None) -> tuple[dict[int, TaskIndex], int | None]:
        """task_flows(step), and the last step they are right for (None: every step)."""
        tasks = self.tasks
        if self._flows_done:
            return tasks, None
        if step is not None:
            part = self._flows_part
            if part is not None and step <= part[0]:
                return part[1], part[0]
            bound = self.prefix_bound(step)
            if bound is not None:
                copies = {tid: copy.copy(t) for tid, t in tasks.items()}
                index_flows(self._trace, copies, upto=bound)
                self._flows_part = (bound, copies)
                return copies, bound
        with self._flows_lock:
            if not self._flows_done:
                index_flows(self._trace, tasks)
                self._flows_done = True
                self._flows_part = None
        return tasks, None

    def run_intervals(self, step: int | None = None) -> tuple[tuple[np.ndarray, ...], Intervals]:
        """(`runs`, their Intervals), or, with `step`, perhaps those of the runs started in a prefix that holds
        `step`, the ones that end after it open (NOTE [prefix indexes])."""
        full = self._runs_full
        if full is not None:
            return full
        if step is not None:
            part = self._runs_part
            if part is not None and step <= part[0]:
                return part[1], part[2]
            bound = self.prefix_bound(step)
            if bound is not None:
                runs = tuple(read_only(a) for a in find_runs(self._trace, bound))
                intervals = Intervals(runs[0], runs[1])
                self._runs_part = (bound, runs, intervals)
                return runs, intervals
        runs = self.runs
        full = self._runs_full = (runs, Intervals(runs[0], runs[1]))  # two threads may both build it: the same
        self._runs_part = None
        return full

    @cached_property
    def _buffer_writes_by_key(self) -> tuple[np.ndarray, np.ndarray]:
        """BufferWritten steps sorted by (graph task, node) and then step, and their sort keys."""
        c = self._trace.columns
        steps = self.steps_of(Kind.BUFFER_WRITTEN)
        keys = c["ev_task"][steps].astype(np.int64) * (self._trace.num_nodes + 1) + c["ev_node"][steps]
        order = np.argsort(keys, kind="stable")
        return read_only(keys[order]), read_only(steps[order])

    def buffer_writes(self, task: int, node: int) -> list[tuple[int, int]]:
        """[(step, slot)] of the BufferWritten events of `node` in graph task `task`, in step order.

        One sort of the writes' keys, then a binary search per question: a state asks for its few waiting
        nodes, and a dict of every write of a 1M-node trace would cost seconds to build.
        """
        keys, steps = self._buffer_writes_by_key
        key = task * (self._trace.num_nodes + 1) + node
        found = steps[np.searchsorted(keys, key, "left"):np.searchsorted(keys, key, "right")]
        return list(zip(found.tolist(), self._trace.columns["ev_a"][found].tolist(), strict=True))

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value derived from the trace alone, computed once per key (e.g. a breakpoint's hits)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]
