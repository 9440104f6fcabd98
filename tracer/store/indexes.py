"""TraceIndex: the derived indexes of one Trace (kind steps, first mentions, node runs, graph tasks, buffers),
built when first asked and owned here alone.

Never imports the engine, textual or rich. Every index is read-only once built.
"""
from __future__ import annotations

import copy
import threading
from functools import cached_property
from typing import Any, Callable

import numpy as np

from agdb.tracer.store.arrays import (
    NEVER,
    Intervals,
    cut,
    first_positions,
    groups,
    lookup_sorted,
    read_only,
    stable_order,
    unique_first,
)
from agdb.tracer.store.columns import TraceColumns
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.tasks import RemainingSnaps, TaskIndex


def index_tasks(trace: TraceColumns) -> dict[int, TaskIndex]:
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


def index_flows(trace: TraceColumns, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
    """Fill in each task's routing decrements and buffer lifetimes (TaskIndex.dec_*, buf_nodes, buffers).

    Apart from `index_tasks` (NOTE [lazy task flows]): only a step inside a graph task needs them. With `upto`,
    only the events up to that step are read: the result is right for the steps up to it (NOTE [prefix indexes]).
    """
    _index_routing(trace, tasks, upto)
    _index_buffers(trace, tasks, upto)
    for t in tasks.values():
        if not isinstance(t.remaining_snaps, RemainingSnaps):  # no decrement: the snapshots still say what is live
            t.remaining_snaps = RemainingSnaps(t)


def _index_routing(trace: TraceColumns, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
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
    for tid, where in groups(rep_tasks[picked_all]).items():
        t = tasks[tid]
        picked = picked_all[where]  # in step order: groups keeps positions ascending
        t.dec_steps, t.dec_nodes = rep_steps[picked], child[picked]
        t.dec_pos = pos[picked] - first_of[tid]
        t.remaining_snaps = RemainingSnaps(t)


def _few_decrements(tasks: dict[int, TaskIndex], steps: np.ndarray, task_of: np.ndarray, child: np.ndarray) -> None:
    """_index_routing's result by a binary search of each edge's child among its task's counted nodes: for few
    edges, where the other ways' arrays of one slot per node would cost more than the search."""
    for tid, where in groups(task_of).items():
        t = tasks.get(tid)
        if t is None:
            continue
        pos, ok = lookup_sorted(t.dep_nodes, child[where].astype(t.dep_nodes.dtype))
        picked = where[ok]  # in step order: groups keeps positions ascending
        t.dec_steps, t.dec_nodes, t.dec_pos = steps[picked], child[picked], pos[ok].astype(np.int64)
        t.remaining_snaps = RemainingSnaps(t)


DENSE = 1 << 22
"""Keys task * (nodes + 1) + node below this: the task indexes use an array slot per key and no sort. A single
backward's fit (tasks are numbered 1, 2, ...); a training loop's thousands of graph tasks do not, and are sorted."""


def _index_buffers(trace: TraceColumns, tasks: dict[int, TaskIndex], upto: int | None = None) -> None:
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
    for tid, where in groups(uniq // width).items():
        t = tasks.get(tid)
        if t is not None:
            t.buf_nodes = uniq[where] % width
            t.buffers = Intervals(writes[first[where]], pushed[where])


def find_runs(trace: TraceColumns, upto: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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


def _index_runs_nested(trace: TraceColumns, upto: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """find_runs, vectorised, for a trace whose runs nest properly on each thread (no errors); else None.

    On one thread, a run's NodeFinished is the next end event at the run's own nesting level, so sorting the
    events by (thread, level, step) puts each start right before its end.
    """
    c = trace.columns
    kinds = c["ev_kind"]
    steps = trace.index.steps_upto(upto, Kind.NODE_STARTED, Kind.NODE_FINISHED)
    threads = np.asarray(c["ev_thread"][steps], dtype=np.int64)
    by_thread = stable_order(threads)  # steps_of is in step order: stable keeps it per thread
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
    order = stable_order(threads * (int(level.max(initial=0)) + 2) + level)
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
    by_start = stable_order(starts)
    if by_start is not None:
        starts, ends, run_threads = starts[by_start], ends[by_start], run_threads[by_start]
    nodes = np.asarray(c["ev_node"][starts], dtype=np.int64)
    return starts.astype(np.int64), ends.astype(np.int64), run_threads, nodes


class TraceIndex:
    """The derived indexes of one Trace, each built on first use and then kept (read-only)."""

    def __init__(self, trace: TraceColumns) -> None:
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
            return cut(self.steps_of(*kinds), upto)
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
