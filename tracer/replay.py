"""Replay: the engine's state at any step of a trace, as a frozen EngineState.

Imports numpy and the standard library only.

NOTE [replaying a trace]
Most of the state is a pure function of event prefixes, computed from index arrays built once per trace:
a node's remaining dependency count is its initial count minus the NodeFinished events of its parents
so far (the engine routes a node's outputs right after it finishes, so the replay counts that routing at
the NodeFinished step); a node waits in not_ready from its first BufferWritten until its TaskPushed;
executed nodes and culprits are prefixes of the NodeStarted and SeqNrBumped events. Only the ready
queues are replayed event by event, with the heap algorithm the engine uses (heapq over items compared
by key alone), so ties leave in exactly the recorded order; when a graph task is gone its leftover tasks
take depth INT_MAX in place, without re-heapifying, as in the engine. Queue checkpoints every `interval`
events bound the work of any seek. The state at a step includes that step's event.
"""
from __future__ import annotations

import bisect
import heapq
import threading
from collections import OrderedDict
from typing import Any, Iterator, Sequence

import numpy as np

from . import events as ev
from .recorder import K_BUMP, K_DEPS, K_EXEC, K_FINISHED, K_NFINISH, K_NSTART, K_POP, K_PUSH, K_STARTED_TASK, seq_decode
from .trace import Trace

INT_MAX = 2**31 - 1
K_BUFFER = ev.KIND_CODES[ev.BufferWritten]
K_ERROR = ev.KIND_CODES[ev.ErrorRaised]
_NEVER = np.iinfo(np.int64).max
_ONE = np.int32(1)
_SNAP = 16384  # remaining-count snapshots every this many decrements bound a seek's work


class NodeSeq(Sequence[int]):
    """A read-only sequence of node indices backed by a numpy array; equal to any equal sequence."""

    __slots__ = ("_arr",)

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr

    def __len__(self) -> int:
        return len(self._arr)

    def __getitem__(self, i):  # type: ignore[override]
        return NodeSeq(self._arr[i]) if isinstance(i, slice) else int(self._arr[i])

    def __iter__(self) -> Iterator[int]:
        return iter(self._arr.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeSeq):
            return np.array_equal(self._arr, other._arr)
        if isinstance(other, (tuple, list)):
            return len(other) == len(self._arr) and self._arr.tolist() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._arr.tolist()))

    def __repr__(self) -> str:
        return f"NodeSeq({self._arr.tolist()})"

    def array(self) -> np.ndarray:
        """The backing read-only array."""
        return self._arr


class ReadyTask:
    """A task waiting in a ready queue."""

    __slots__ = ("node", "name", "seq_nr", "priority", "graph_task", "pushed_at")

    def __init__(self, node: int | None, name: str, seq_nr: int, priority: tuple[int, int], graph_task: int,
                 pushed_at: int) -> None:
        self.node, self.name, self.seq_nr, self.priority = node, name, seq_nr, priority
        self.graph_task, self.pushed_at = graph_task, pushed_at

    def _key(self) -> tuple:
        return (self.node, self.name, self.seq_nr, self.priority, self.graph_task, self.pushed_at)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReadyTask) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ReadyTask({self.name}, priority={self.priority}, pushed_at={self.pushed_at})"


class QueueState:
    """One ready queue: its tasks in the order they will be popped."""

    __slots__ = ("name", "tasks")

    def __init__(self, name: str, tasks: tuple[ReadyTask, ...]) -> None:
        self.name, self.tasks = name, tasks

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueState) and (self.name, self.tasks) == (other.name, other.tasks)

    def __hash__(self) -> int:
        return hash((self.name, self.tasks))

    def __repr__(self) -> str:
        return f"QueueState({self.name}, {len(self.tasks)} tasks)"


class GraphTaskState:
    """A graph task still running: remaining counts, waiting buffers, pruning and exec_info."""

    __slots__ = ("graph_task", "reentrant_depth", "min_topo_nr", "_dep_nodes", "_dep_counts", "_waiting",
                 "_slots", "pruned", "needed", "captured")

    def __init__(self, graph_task: int, reentrant_depth: int, min_topo_nr: int, dep_nodes: np.ndarray,
                 dep_counts: np.ndarray, waiting: np.ndarray, slots: Any, pruned: tuple, needed: tuple,
                 captured: tuple) -> None:
        self.graph_task, self.reentrant_depth, self.min_topo_nr = graph_task, reentrant_depth, min_topo_nr
        self._dep_nodes, self._dep_counts, self._waiting, self._slots = dep_nodes, dep_counts, waiting, slots
        self.pruned, self.needed, self.captured = pruned, needed, captured

    @property
    def dependencies(self) -> tuple[tuple[int, int], ...]:
        """(node, remaining count) of every node still counted, by node."""
        return tuple(zip(self._dep_nodes.tolist(), self._dep_counts.tolist(), strict=True))

    def dependency_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The same as two read-only arrays (nodes, counts): cheap for large graphs."""
        return self._dep_nodes, self._dep_counts

    @property
    def not_ready(self) -> tuple[tuple[int, tuple[bool, ...]], ...]:
        """(node, filled slots) of every node whose input buffer waits for more grads."""
        return tuple((int(n), self._slots(int(n))) for n in self._waiting)

    def waiting_nodes(self) -> np.ndarray:
        """The nodes of not_ready as a read-only array."""
        return self._waiting

    def _key(self) -> tuple:
        return (self.graph_task, self.reentrant_depth, self.min_topo_nr, self._dep_nodes.tolist(),
                self._dep_counts.tolist(), self.not_ready, self.pruned, self.needed, self.captured)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphTaskState) and self._key() == other._key()

    def nbytes(self) -> int:
        """Bytes of the arrays this state holds (what the Replay's cache weighs it by)."""
        return self._dep_nodes.nbytes + self._dep_counts.nbytes + self._waiting.nbytes

    def __repr__(self) -> str:
        return (f"GraphTaskState({self.graph_task}, depth={self.reentrant_depth}, {len(self._dep_nodes)} counted, "
                f"{len(self._waiting)} waiting)")


def state_bytes(state: EngineState) -> int:
    """Roughly how much memory a state holds: its arrays, plus a little for the rest."""
    return 1024 + sum(gt.nbytes() for gt in state.graph_tasks)


class EngineState:
    """Everything the engine holds at one step of a trace. Immutable; large parts are read-only arrays."""

    __slots__ = ("step", "num_steps", "event", "ready_queues", "graph_tasks", "executed", "running", "culprits")

    def __init__(self, step: int, num_steps: int, event: ev.Event, ready_queues: tuple[QueueState, ...],
                 graph_tasks: tuple[GraphTaskState, ...], executed: NodeSeq, running: tuple[tuple[int, int], ...],
                 culprits: int) -> None:
        self.step, self.num_steps, self.event = step, num_steps, event
        self.ready_queues, self.graph_tasks, self.executed = ready_queues, graph_tasks, executed
        self.running, self.culprits = running, culprits  # running: (thread, node); culprits: bumps so far

    @property
    def dependencies(self) -> dict[int, int]:
        """Remaining dependency count of every node still counted (the innermost graph task wins)."""
        out: dict[int, int] = {}
        for gt in self.graph_tasks:
            out.update(gt.dependencies)
        return out

    @property
    def not_ready(self) -> dict[int, tuple[bool, ...]]:
        """Nodes with a partly filled input buffer, and which slots are filled."""
        out: dict[int, tuple[bool, ...]] = {}
        for gt in self.graph_tasks:
            out.update(gt.not_ready)
        return out

    @property
    def pruned(self) -> tuple[int, ...]:
        """Nodes pruned by topological_nr in the running graph tasks."""
        return tuple(n for gt in self.graph_tasks for n in gt.pruned)

    def _key(self) -> tuple:
        return (self.step, self.num_steps, self.event, self.ready_queues, self.graph_tasks, self.executed,
                self.running, self.culprits)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EngineState) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"EngineState(step={self.step}, event={type(self.event).__name__}, executed={len(self.executed)})"


class _TaskIndex:
    """What never changes about one graph task of a trace, plus its event indices."""

    def __init__(self) -> None:
        self.start, self.end, self.depth, self.min_topo = 0, _NEVER, 0, 0
        self.dep_nodes = np.zeros(0, np.int32)  # int32: half the bytes a step copies (NOTE [fresh memory])
        self.dep_counts = np.zeros(0, np.int32)
        self.dec_steps = np.zeros(0, np.int64)  # steps at which one parent edge of dec_nodes was routed
        self.dec_nodes = np.zeros(0, np.int64)
        self.dec_pos = np.zeros(0, np.int64)  # index of each dec_nodes entry in dep_nodes
        self.remaining_snaps: list[np.ndarray] = []  # dep_counts minus the first k*_SNAP decrements
        self.buf_nodes = np.zeros(0, np.int64)  # nodes that got a BufferWritten, with when their buffer
        self.buffers = _Intervals(np.zeros(0, np.int64), np.zeros(0, np.int64))  # opened and was pushed
        self.pruned: tuple = ()
        self.needed: tuple = ()
        self.captured: tuple = ()


class Replay:
    """`Replay(trace).state_at(step)`: the engine's state just after event `step`, frozen and cached.

    `interval` is the number of queue events (pushes, pops, graph-task ends) between queue checkpoints.
    """

    def __init__(self, trace: Trace, interval: int = 128) -> None:
        if len(trace) == 0:
            raise ValueError("this trace holds no events, so there is no step to show")
        self.trace = trace
        self.interval = max(1, int(interval))
        c = trace.columns
        kinds = c["ev_kind"]
        self._started_steps = np.flatnonzero(kinds == K_NSTART)
        self._started_nodes = np.asarray(c["ev_node"][self._started_steps], dtype=np.int64)
        self._started_nodes.flags.writeable = False
        self._bump_steps = np.flatnonzero(kinds == K_BUMP)
        self._tasks = _index_tasks(trace)
        self._runs = _index_runs(trace)
        self._run_intervals = _Intervals(self._runs[0], self._runs[1])
        if trace.num_nodes:
            trace.node(0)  # builds the trace's node index now, so no seek pays for it
        self._queue_steps = np.flatnonzero((kinds == K_PUSH) | (kinds == K_POP) | (kinds == K_FINISHED))
        self._qevents = _QueueEvents(trace, self._queue_steps, {task: t.depth for task, t in self._tasks.items()})
        # Checkpoints are built on demand, in order, up to the step asked for (NOTE [lazy checkpoints]).
        self._checkpoints: list[tuple[int, dict]] = [(-1, {})]
        self._built = 0  # queue events applied to `_building` so far
        self._building: dict[int, list] = {}
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, EngineState] = OrderedDict()  # least recently used first
        self._cache_bytes = 0

    # -- queues -------------------------------------------------------------------------------------------------
    # NOTE [lazy checkpoints]: building every queue checkpoint of a 1M-event trace takes about half a
    # second, which would delay the TUI's first paint. So they are built as far as a step needs, in
    # chunks under a lock, and `warm()` (run by the TUI in a worker thread) builds the rest ahead of time.
    def _extend_checkpoints(self, upto: int, chunk: int = 1 << 62) -> None:
        """Apply queue events until a checkpoint at or past step `upto` exists (at most `chunk` events)."""
        steps = self._queue_steps
        with self._lock:
            target = int(np.searchsorted(steps, upto, side="right"))
            stop = min(target, self._built + chunk)
            heaps = self._building
            for i in range(self._built, stop):
                self._apply_queue_event(heaps, i)
                if (i + 1) % self.interval == 0:
                    self._checkpoints.append((int(steps[i]), _copy_heaps(heaps)))
            self._built = max(self._built, stop)

    def warm(self, should_stop: Any = lambda: False) -> None:
        """Build every queue checkpoint now, a chunk at a time, until done or `should_stop()` is true."""
        last = int(self._queue_steps[-1]) if len(self._queue_steps) else -1
        while self._built < len(self._queue_steps) and not should_stop():
            self._extend_checkpoints(last, chunk=self.interval * 64)

    def _apply_queue_event(self, heaps: dict, i: int) -> None:
        kind, queue, task, node, extra = self._qevents.get(i)
        step = int(self._queue_steps[i])
        if kind == K_PUSH:
            heapq.heappush(heaps.setdefault(queue, []), _Item(list(extra), step, task, node))
        elif kind == K_POP:
            heap = heaps.setdefault(queue, [])
            if heap and heap[0].push_step == extra:
                heapq.heappop(heap)
            else:  # a trace from elsewhere whose pops do not follow this heap: drop the recorded task
                kept = [item for item in heap if item.push_step != extra]
                heapq.heapify(kept)
                heaps[queue] = kept
        else:  # GraphTaskFinished: its leftover tasks turn stale in place
            for heap in heaps.values():
                for item in heap:
                    if item.graph_task == task and item.key[0] == 2:
                        item.key[1] = -INT_MAX

    def _queues_at(self, step: int) -> tuple[QueueState, ...]:
        if self._checkpoints[-1][0] < step and self._built < len(self._queue_steps):
            self._extend_checkpoints(step)
        i = bisect.bisect_right(self._checkpoints, step, key=lambda cp: cp[0]) - 1
        base, saved = self._checkpoints[i]
        heaps = _copy_heaps(saved)
        lo = int(np.searchsorted(self._queue_steps, base, side="right"))
        hi = int(np.searchsorted(self._queue_steps, step, side="right"))
        for k in range(lo, hi):
            self._apply_queue_event(heaps, k)
        trace = self.trace
        out = []
        for q in sorted(heaps):
            tasks = []
            for item in _pop_order(heaps[q]):
                prio = (-item.key[1], -item.key[2]) if item.key[0] == 2 else (-1, -1)
                node = item.node if item.node >= 0 else None
                tasks.append(ReadyTask(node, trace.node_name(item.node), prio[1], prio, item.graph_task,
                                       item.push_step))
            out.append(QueueState(trace.queues[q], tuple(tasks)))
        return tuple(out)

    # -- the rest -----------------------------------------------------------------------------------------------
    def _graph_tasks_at(self, step: int) -> tuple[GraphTaskState, ...]:
        out = []
        for tid in sorted(self._tasks):
            t = self._tasks[tid]
            if not t.start <= step < t.end:
                continue
            done = int(np.searchsorted(t.dec_steps, step, side="right"))
            snap = done // _SNAP
            counts = (t.remaining_snaps[snap - 1] if snap else t.dep_counts).astype(np.int32)  # a copy
            # In place: a bincount would allocate a count per node (NOTE [fresh memory]). The 1 must be an
            # int32 like the counts: with a Python int, ufunc.at leaves its fast path and is 30x slower.
            np.subtract.at(counts, t.dec_pos[snap * _SNAP:done], _ONE)
            live = counts > 0
            dep_nodes, dep_counts = _ro(t.dep_nodes[live]), _ro(counts[live])
            waiting_nodes = _ro(t.buf_nodes[t.buffers.open_at(step)])
            out.append(GraphTaskState(tid, t.depth, t.min_topo, dep_nodes, dep_counts, waiting_nodes,
                                      self._slot_reader(tid, step), t.pruned, t.needed, t.captured))
        return tuple(out)

    def _slot_reader(self, task: int, step: int) -> Any:
        trace = self.trace

        def slots(node: int) -> tuple[bool, ...]:
            c = trace.columns
            writes = self._buffer_writes.get((task, node), ())
            filled = [False] * max(int(c["node_inputs"][node]), 1)
            for s, slot in writes:
                if s <= step:
                    if slot >= len(filled):
                        filled.extend([False] * (slot + 1 - len(filled)))
                    filled[slot] = True
            return tuple(filled)

        return slots

    @property
    def _buffer_writes(self) -> dict:
        writes = self.__dict__.get("_bw")
        if writes is None:
            c = self.trace.columns
            writes = {}
            for s in np.flatnonzero(c["ev_kind"] == K_BUFFER).tolist():
                writes.setdefault((int(c["ev_task"][s]), int(c["ev_node"][s])), []).append((s, int(c["ev_a"][s])))
            self.__dict__["_bw"] = writes
        return writes

    def _running_at(self, step: int) -> tuple[tuple[int, int], ...]:
        live = self._run_intervals.open_at(step)
        _, _, threads, nodes = self._runs
        return tuple(sorted(zip(threads[live].tolist(), nodes[live].tolist(), strict=True)))

    def state_at(self, step: int) -> EngineState:
        """The state after event `step` (0 <= step < len(trace))."""
        n = len(self.trace)
        if not 0 <= step < n:
            raise IndexError(f"step {step} is outside this trace's steps 0..{n - 1}")
        cached = self._cache.get(step)
        if cached is not None:
            self._cache.move_to_end(step)
            return cached
        done = int(np.searchsorted(self._started_steps, step, side="right"))
        state = EngineState(step, n, self.trace[step], self._queues_at(step), self._graph_tasks_at(step),
                            NodeSeq(self._started_nodes[:done]), self._running_at(step),
                            int(np.searchsorted(self._bump_steps, step, side="right")))
        self._remember(step, state)
        return state

    # NOTE [fresh memory]: on the VMs agdb is measured on, touching memory the process has never used costs
    # about 1 ms per 1.6 MB (page faults), 30x the cost of reusing freed memory. A 100k-node step holds
    # ~0.8 MB of dependency arrays; a cache of 256 such states kept the heap growing into fresh pages on
    # every step. So the cache is bounded in bytes too, and evicts one old state at a time, whose freed
    # arrays the next step reuses.
    _CACHE_STATES = 256
    _CACHE_BYTES = 24 << 20

    def _remember(self, step: int, state: EngineState) -> None:
        cost = state_bytes(state)
        while self._cache and (len(self._cache) >= self._CACHE_STATES
                               or self._cache_bytes + cost > self._CACHE_BYTES):
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= state_bytes(old)
        self._cache[step] = state
        self._cache_bytes += cost

    def culprits(self, upto: int | None = None) -> tuple[ev.SeqNrBumped, ...]:
        """Every sequence-number increment up to step `upto` (all when None), in order."""
        steps = self._bump_steps if upto is None else self._bump_steps[
            :int(np.searchsorted(self._bump_steps, upto, side="right"))]
        return tuple(self.trace[int(s)] for s in steps)


class _QueueEvents:
    """(kind, queue, graph task, node, key or matching push step) of the i-th queue event, made on demand."""

    def __init__(self, trace: Trace, steps: np.ndarray, depth_of: dict[int, int]) -> None:
        c = trace.columns
        kinds = c["ev_kind"][steps]
        self.kinds, self.queues = kinds.tolist(), c["ev_a"][steps].tolist()
        self.tasks, self.nodes = c["ev_task"][steps].tolist(), c["ev_node"][steps].tolist()
        # The i-th queue event's row in push_seq (a push) or pop_push (a pop).
        self.rank = (np.cumsum(kinds == K_PUSH) - 1).tolist(), (np.cumsum(kinds == K_POP) - 1).tolist()
        self.push_seq, self.pop_push = c["push_seq"], c["pop_push"]
        self.depth_of = depth_of

    def get(self, i: int) -> tuple:
        kind, task = self.kinds[i], self.tasks[i]
        extra: Any = None
        if kind == K_PUSH:
            code = int(self.push_seq[self.rank[0][i]])
            extra = [1, 0, 0] if code == -2 else [2, -self.depth_of.get(task, 0), -seq_decode(code)]
        elif kind == K_POP:
            code = int(self.pop_push[self.rank[1][i]])
            extra = -code - 2 if code < -1 else code
        return kind, self.queues[i], task, self.nodes[i], extra


class _Intervals:
    """Half-open step intervals [start, end); `open_at(step)` lists those containing a step, quickly.

    Intervals are kept in start order, with the set open at every `every`-th start remembered, so a
    query looks only at that set and at the intervals started since.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray, every: int = 4096) -> None:
        order = np.argsort(starts, kind="stable")
        self.order, self.starts, self.ends = order, starts[order], ends[order]
        self.marks: list[int] = []
        self.open: list[np.ndarray] = []
        for upto in range(every, len(order) + 1, every):
            mark = int(self.starts[upto - 1])
            idx = np.arange(upto)
            self.marks.append(mark)
            self.open.append(idx[self.ends[:upto] > mark])

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


class _Item:
    """A heap entry compared by key alone, like the engine's NodeTask."""

    __slots__ = ("key", "push_step", "graph_task", "node")

    def __init__(self, key: list, push_step: int, graph_task: int, node: int) -> None:
        self.key, self.push_step, self.graph_task, self.node = key, push_step, graph_task, node

    def __lt__(self, other: _Item) -> bool:
        return self.key < other.key


def _pop_order(heap: list[_Item]) -> list[_Item]:
    """The order a heap would pop its items in: a sort when no two keys tie, else a simulation.

    With distinct keys every pop takes the least key, so sorting gives the order; ties leave in the
    order the heap's shape dictates (NOTE [ready queue order] in the engine), which only popping shows.
    """
    keys = [tuple(item.key) for item in heap]
    if len(set(keys)) == len(keys):
        return [item for _, item in sorted(zip(keys, heap, strict=True), key=lambda pair: pair[0])]
    copy = list(heap)
    return [heapq.heappop(copy) for _ in range(len(copy))]


def _copy_heaps(heaps: dict) -> dict:
    return {q: [_Item(list(i.key), i.push_step, i.graph_task, i.node) for i in heap] for q, heap in heaps.items()}


def _ro(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    arr.flags.writeable = False
    return arr


def _index_tasks(trace: Trace) -> dict[int, _TaskIndex]:
    """Per graph task: its span, initial counts, routing decrements and buffer lifetimes."""
    c = trace.columns
    kinds, tasks_col = c["ev_kind"], c["ev_task"]
    tasks: dict[int, _TaskIndex] = {}
    for row, s in enumerate(trace.steps_of(K_STARTED_TASK).tolist()):  # side rows follow step order
        t = tasks.setdefault(int(tasks_col[s]), _TaskIndex())
        t.start, t.depth = s, int(c["task_depth"][row])
    for s in np.flatnonzero(kinds == K_FINISHED).tolist():
        tasks.setdefault(int(tasks_col[s]), _TaskIndex()).end = s
    # Read from the columns: decoding the DependenciesComputed event would make a tuple of 100k pairs.
    for row, s in enumerate(trace.steps_of(K_DEPS).tolist()):  # side rows follow step order
        t = tasks.setdefault(int(tasks_col[s]), _TaskIndex())
        lo, hi = int(c["deps_start"][row]), int(c["deps_start"][row + 1])
        nodes = np.asarray(c["deps_node"][lo:hi], dtype=np.int32)
        by_node = np.argsort(nodes, kind="stable")
        t.dep_nodes, t.dep_counts = nodes[by_node], np.asarray(c["deps_count"][lo:hi], dtype=np.int32)[by_node]
        plo, phi = int(c["pruned_start"][row]), int(c["pruned_start"][row + 1])
        t.min_topo, t.pruned = int(c["ev_b"][s]), tuple(c["pruned_node"][plo:phi].tolist())
    for s in np.flatnonzero(kinds == K_EXEC).tolist():
        e = trace[s]
        t = tasks.setdefault(e.graph_task, _TaskIndex())
        t.needed, t.captured = e.needed, tuple(n for n, _, _ in e.captured)
    _index_routing(trace, tasks)
    _index_buffers(trace, tasks)
    return tasks


def _index_routing(trace: Trace, tasks: dict[int, _TaskIndex]) -> None:
    c = trace.columns
    finished = np.flatnonzero(c["ev_kind"] == K_NFINISH)
    starts, children = c["node_edge_start"], c["edge_child"]
    fin_nodes = np.asarray(c["ev_node"][finished], dtype=np.int64)
    fin_tasks = np.asarray(c["ev_task"][finished], dtype=np.int64)
    counts = (starts[fin_nodes + 1] - starts[fin_nodes]).astype(np.int64) if len(finished) else np.zeros(0, int)
    rep_steps = np.repeat(finished, counts)
    rep_tasks = np.repeat(fin_tasks, counts)
    offsets = np.repeat(starts[fin_nodes].astype(np.int64), counts) if len(finished) else np.zeros(0, int)
    within = np.arange(len(rep_steps)) - np.repeat(np.cumsum(counts) - counts, counts) if len(finished) else offsets
    child = children[offsets + within].astype(np.int64) if len(rep_steps) else np.zeros(0, np.int64)
    valid = child >= 0
    rep_steps, rep_tasks, child = rep_steps[valid], rep_tasks[valid], child[valid]
    for tid, t in tasks.items():
        mine = rep_tasks == tid
        nodes = child[mine]
        counted = np.isin(nodes, t.dep_nodes)  # the engine only decrements counted nodes
        t.dec_steps, t.dec_nodes = rep_steps[mine][counted], nodes[counted]
        t.dec_pos = np.searchsorted(t.dep_nodes, t.dec_nodes)
        t.remaining_snaps = [(t.dep_counts - np.bincount(t.dec_pos[:end], minlength=len(t.dep_nodes))).astype(np.int32)
                             for end in range(_SNAP, len(t.dec_pos) + 1, _SNAP)]


def _index_buffers(trace: Trace, tasks: dict[int, _TaskIndex]) -> None:
    c = trace.columns
    kinds = c["ev_kind"]
    writes = np.flatnonzero(kinds == K_BUFFER)
    pushes = np.flatnonzero(kinds == K_PUSH)
    for tid, t in tasks.items():
        w = writes[c["ev_task"][writes] == tid]
        if not len(w):
            continue
        nodes = np.asarray(c["ev_node"][w], dtype=np.int64)
        uniq, first = np.unique(nodes, return_index=True)
        first_steps = w[first]
        p = pushes[c["ev_task"][pushes] == tid]
        p_nodes = np.asarray(c["ev_node"][p], dtype=np.int64)
        pushed = np.full(len(uniq), _NEVER, dtype=np.int64)
        order = np.argsort(p_nodes, kind="stable")
        sorted_nodes, sorted_steps = p_nodes[order], p[order]
        pos = np.searchsorted(sorted_nodes, uniq)
        ok = (pos < len(sorted_nodes)) & (sorted_nodes[np.minimum(pos, max(len(sorted_nodes) - 1, 0))] == uniq) \
            if len(sorted_nodes) else np.zeros(len(uniq), bool)
        pushed[ok] = sorted_steps[pos[ok]]
        t.buf_nodes, t.buffers = uniq, _Intervals(first_steps, pushed)


def _index_runs(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, thread, node) of every node execution; end is its NodeFinished or ErrorRaised.

    Kept on the trace (read-only arrays): the Replay and the forward map both need it.
    """
    found = trace.__dict__.get("_run_index")
    if found is None:
        found = trace.__dict__["_run_index"] = tuple(_ro(a) for a in _find_runs(trace))
    return found


def _find_runs(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    c = trace.columns
    kinds = c["ev_kind"]
    if not (kinds == K_ERROR).any():
        found = _index_runs_nested(trace)
        if found is not None:
            return found
    steps = np.flatnonzero((kinds == K_NSTART) | (kinds == K_NFINISH) | (kinds == K_ERROR))
    open_runs: dict[int, list] = {}
    starts, ends, threads, nodes = [], [], [], []
    for s in steps.tolist():
        kind, thread = int(kinds[s]), int(c["ev_thread"][s])
        stack = open_runs.setdefault(thread, [])
        if kind == K_NSTART:
            stack.append(len(starts))
            starts.append(s)
            ends.append(_NEVER)
            threads.append(thread)
            nodes.append(int(c["ev_node"][s]))
        elif stack:
            ends[stack.pop()] = s
    return (np.array(starts, np.int64), np.array(ends, np.int64), np.array(threads, np.int64),
            np.array(nodes, np.int64))


def _index_runs_nested(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """_index_runs, vectorised, for a trace whose runs nest properly on each thread (no errors); else None.

    On one thread, a run's NodeFinished is the next end event at the run's own nesting level, so sorting the
    events by (thread, level, step) puts each start right before its end.
    """
    c = trace.columns
    kinds = c["ev_kind"]
    steps = np.flatnonzero((kinds == K_NSTART) | (kinds == K_NFINISH))
    threads = np.asarray(c["ev_thread"][steps], dtype=np.int64)
    by_thread = np.lexsort((steps, threads))
    steps, threads = steps[by_thread], threads[by_thread]
    is_start = kinds[steps] == K_NSTART
    total = np.cumsum(np.where(is_start, 1, -1))
    first = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1]]) if len(steps) else np.zeros(0, np.int64)
    offsets = np.where(first > 0, total[np.maximum(first - 1, 0)], 0)
    depth = total - np.repeat(offsets, np.diff(np.r_[first, len(steps)]))
    if len(depth) and depth.min() < 0:
        return None  # an end with no run open: leave it to the general loop
    level = np.where(is_start, depth, depth + 1)
    order = np.lexsort((steps, level, threads))
    s_steps, s_start, s_level, s_thread = steps[order], is_start[order], level[order], threads[order]
    nxt = np.arange(1, len(order) + 1)
    has_next = nxt < len(order)
    nxt = np.minimum(nxt, max(len(order) - 1, 0))
    closes = has_next & ~s_start[nxt] & (s_level[nxt] == s_level) & (s_thread[nxt] == s_thread)
    starts = s_steps[s_start]
    ends = np.where(closes, s_steps[nxt], _NEVER)[s_start]
    run_threads = s_thread[s_start]
    by_start = np.argsort(starts, kind="stable")
    starts, ends, run_threads = starts[by_start], ends[by_start], run_threads[by_start]
    nodes = np.asarray(c["ev_node"][starts], dtype=np.int64)
    return starts.astype(np.int64), ends.astype(np.int64), run_threads, nodes
