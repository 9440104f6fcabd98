"""Replay: the engine's state at any step of a trace, as a frozen EngineState.

Never imports the engine, textual or rich. The state types are in `replay/state.py`, the trace's indexes this
reads in `store/indexes.py` and `store/tasks.py`, the queue's rules in `replay/scheduler.py`.

NOTE [replaying a trace]
Most of the state is a pure function of event prefixes, computed from index arrays built once per trace:
a node's remaining dependency count is its initial count minus the NodeFinished events of its parents
so far (the engine routes a node's outputs right after it finishes, so the replay counts that routing at
the NodeFinished step); a node waits in not_ready from its first BufferWritten until its TaskPushed;
executed nodes and culprits are prefixes of the NodeStarted and SeqNrBumped events. Only the ready
queues are replayed event by event, with the engine's keys and heap (NOTE [scheduler rules] in scheduler), so
ties leave in exactly the recorded order; when a graph task is gone its leftover tasks take depth INT_MAX in
place, without re-heapifying, as in the engine. Queue checkpoints every `interval` events bound the work of
any seek. The state at a step includes that step's event.
"""
from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from agdb.tracer.replay import scheduler
from agdb.tracer.replay.scheduler import NodeTask
from agdb.tracer.replay.state import EngineState, GraphTaskState, NodeSeq, QueueState, ReadyTask, state_bytes
from agdb.tracer.store import events as ev
from agdb.tracer.store.arrays import Intervals, read_only, unique_first
from agdb.tracer.store.schema import WAKE_UP, Kind, seq_decode
from agdb.tracer.store.tasks import TaskCounts
from agdb.tracer.store.trace import Trace

__all__ = ["Replay", "EngineState", "GraphTaskState", "NodeSeq", "QueueState", "ReadyTask", "state_bytes"]

_PUSH, _POP = int(Kind.TASK_PUSHED), int(Kind.TASK_POPPED)


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
        index = trace.index
        self._started_steps = index.steps_of(Kind.NODE_STARTED)
        self._started_nodes = np.asarray(c["ev_node"][self._started_steps], dtype=np.int64)
        self._started_nodes.flags.writeable = False
        self._bump_steps = index.steps_of(Kind.SEQ_NR_BUMPED)
        self._tasks = index.tasks
        # Which graph tasks are running at a step, by one comparison over arrays: a training loop's trace has
        # thousands of graph tasks, and a loop over them all cost ~1 ms a step.
        self._task_ids = np.array(sorted(self._tasks), dtype=np.int64)
        self._task_spans = np.array([(self._tasks[t].start, self._tasks[t].end) for t in self._task_ids.tolist()],
                                    dtype=np.int64).reshape(-1, 2)
        if trace.num_nodes:
            trace.node(0)  # builds the trace's node index now, so no seek pays for it
        self._queue_steps = index.steps_of(Kind.TASK_PUSHED, Kind.TASK_POPPED, Kind.GRAPH_TASK_FINISHED)
        self._qevents = _QueueEvents(trace, self._queue_steps, {task: t.depth for task, t in self._tasks.items()})
        # Checkpoints are built on demand, in order, up to the step asked for (NOTE [lazy checkpoints]).
        self._checkpoints: list[tuple[int, dict]] = [(-1, {})]
        self._built = 0  # queue events applied to `_building` so far
        self._building: dict[int, list] = {}
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, EngineState] = OrderedDict()  # least recently used first
        self._cache_cost: dict[int, int] = {}  # each cached state's bytes when last weighed
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

    def warm(self, should_stop: Any = lambda: False, between: Any = lambda: None) -> None:
        """Build the lazy indexes (NOTE [lazy task flows] in indexes) and every queue checkpoint now, a chunk at
        a time, until done or `should_stop()` is true. `between()` runs before each chunk: a caller sharing the
        GIL with a UI thread can sleep there (a chunk is ~1,000 queue events, a few ms)."""
        between()
        self.trace.index.task_flows()
        between()
        self._runs_until(None)
        last = int(self._queue_steps[-1]) if len(self._queue_steps) else -1
        while self._built < len(self._queue_steps) and not should_stop():
            between()
            self._extend_checkpoints(last, chunk=self.interval * 8)

    def _apply_queue_event(self, heaps: dict, i: int) -> None:
        kind, queue, task, node, extra = self._qevents.get(i)
        step = int(self._queue_steps[i])
        if kind == _PUSH:
            scheduler.push(heaps.setdefault(queue, []), NodeTask(extra, task, node, step))
        elif kind == _POP:
            heap = heaps.setdefault(queue, [])
            if heap and heap[0].push_step == extra:
                scheduler.pop(heap)
            else:  # a trace from elsewhere whose pops do not follow this heap: drop the recorded task
                kept = [item for item in heap if item.push_step != extra]
                scheduler.heapify(kept)
                heaps[queue] = kept
        else:  # GraphTaskFinished: its leftover tasks turn stale in place
            for heap in heaps.values():
                scheduler.mark_gone(heap, task)

    def _queues_at(self, step: int) -> tuple[QueueState, ...]:
        # Within one interval of the last checkpoint, the seek applies the events itself, without the lock that
        # a warm() chunk in another thread may hold.
        hi = int(np.searchsorted(self._queue_steps, step, side="right"))
        within = hi - (len(self._checkpoints) - 1) * self.interval
        heaps = None
        if within > self.interval and self._built < len(self._queue_steps):
            if within > self._EMPTY_REACH * self.interval:  # far: NOTE [empty queues]
                lo, heaps = self._from_empty(hi)
            if heaps is None:
                self._extend_checkpoints(step)
        if heaps is None:
            i = bisect.bisect_right(self._checkpoints, step, key=lambda cp: cp[0]) - 1
            base, saved = self._checkpoints[i]
            heaps = _copy_heaps(saved)
            lo = int(np.searchsorted(self._queue_steps, base, side="right"))
        for k in range(lo, hi):
            self._apply_queue_event(heaps, k)
        trace = self.trace
        out = []
        for q in sorted(heaps):
            tasks = []
            for item in scheduler.pop_order(heaps[q]):
                prio = scheduler.priority(item)
                node = item.node if item.node >= 0 else None
                tasks.append(ReadyTask(node, trace.node_name(item.node), prio[1], prio, item.graph_task,
                                       item.push_step))
            out.append(QueueState(trace.queues[q], tuple(tasks)))
        return tuple(out)

    # NOTE [empty queues]: a seek far past the checkpoints built so far (the first G after the first paint of a
    # 1M-node trace replayed 2M queue events, 7 s) need not start from the last checkpoint: where every queue is
    # empty, the heaps are known without replaying what came before (an empty list per queue seen so far). In a
    # trace whose pops each undo an earlier push of the same queue, once, the queues are all empty exactly where
    # the pushes so far equal the pops so far. A seek more than _EMPTY_REACH intervals past the checkpoints
    # starts from the last such point if it lies within that many queue events of the step (a nearer seek, as
    # when stepping on, extends the checkpoints as before). Checkpoints past it stay the warm-up's job.
    _EMPTY_REACH = 8

    def _from_empty(self, hi: int) -> tuple[int, dict | None]:
        """(queue events applied, heaps) at the last point with every queue empty, near enough before the first
        `hi` queue events, or (0, None)."""
        empty = self._empty_points()
        k = int(np.searchsorted(empty, hi, side="right")) - 1
        if k < 0 or hi - int(empty[k]) > self._EMPTY_REACH * self.interval:
            return 0, None
        count = int(empty[k])
        return count, {q: [] for q in self._queue_firsts[self._queue_firsts[:, 1] < count, 0].tolist()}

    def _empty_points(self) -> np.ndarray:
        """The counts of queue events after which every queue is empty (empty when pops do not undo pushes one to
        one), found once."""
        found = getattr(self, "_empty", None)
        if found is None:
            found = self._empty = _empty_points(self.trace, self._queue_steps, self._qevents)
            queues = self._qevents.columns[1]
            kinds = self._qevents.columns[0]
            moved = np.flatnonzero(kinds != int(Kind.GRAPH_TASK_FINISHED))
            ids, first = unique_first(queues[moved])
            self._queue_firsts = np.column_stack((ids, moved[first])).astype(np.int64).reshape(-1, 2)
        return found

    # -- the rest -----------------------------------------------------------------------------------------------
    def _graph_tasks_at(self, step: int) -> tuple[GraphTaskState, ...]:
        out = []
        spans = self._task_spans
        live = self._task_ids[(spans[:, 0] <= step) & (step < spans[:, 1])].tolist()
        tasks = self.trace.index.task_flows(step) if live else self._tasks
        for tid in live:
            t = tasks[tid]
            done = int(np.searchsorted(t.dec_steps, step, side="right"))
            counts = TaskCounts(t, done)  # read lazily: NOTE [counts at a step] in store/tasks.py
            waiting_nodes = read_only(t.buf_nodes[t.buffers.open_at(step)])
            out.append(GraphTaskState(tid, t.depth, t.min_topo, counts, waiting_nodes,
                                      self._slot_reader(tid, step), t.pruned, t.needed, t.captured))
        return tuple(out)

    def _slot_reader(self, task: int, step: int) -> Any:
        trace = self.trace

        def slots(node: int) -> tuple[bool, ...]:
            c = trace.columns
            writes = self.trace.index.buffer_writes(task, node)
            filled = [False] * max(int(c["node_inputs"][node]), 1)
            for s, slot in writes:
                if s <= step:
                    if slot >= len(filled):
                        filled.extend([False] * (slot + 1 - len(filled)))
                    filled[slot] = True
            return tuple(filled)

        return slots

    def _running_at(self, step: int) -> tuple[tuple[int, int], ...]:
        found = self._runs_until(step)
        if found is None:
            return ()
        (_, _, threads, nodes), intervals = found
        live = intervals.open_at(step)
        return tuple(sorted(zip(threads[live].tolist(), nodes[live].tolist(), strict=True)))

    def _runs_until(self, step: int | None) -> tuple[tuple[np.ndarray, ...], Intervals] | None:
        """The node runs and their intervals, right up to `step` at least (all with None), or None while `step`
        comes before the first NodeStarted (no run yet): a 1M-node trace's runs take 0.1-0.3 s to find, and the
        TUI first shows step 0, usually in the forward (NOTE [prefix indexes])."""
        if not len(self._started_steps) or (step is not None and step < self._started_steps[0]):
            return None
        return self.trace.index.run_intervals(step)

    def state_at(self, step: int) -> EngineState:
        """The state after event `step` (0 <= step < len(trace))."""
        n = len(self.trace)
        if not 0 <= step < n:
            raise IndexError(f"step {step} is outside this trace's steps 0..{n - 1}")
        cached = self._cache.get(step)
        if cached is not None:
            self._cache.move_to_end(step)
            # Weighed again: a state makes its dependency arrays only when asked (NOTE [counts at a step]).
            cost = state_bytes(cached)
            self._cache_bytes += cost - self._cache_cost[step]
            self._cache_cost[step] = cost
            self._evict(0, keep=1)
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
        self._evict(cost)
        self._cache[step] = state
        self._cache_cost[step] = cost
        self._cache_bytes += cost

    def _evict(self, room: int, keep: int = 0) -> None:
        """Evict the oldest states until `room` more bytes and one more state fit, keeping the newest `keep`."""
        while len(self._cache) > keep and (len(self._cache) >= self._CACHE_STATES + keep
                                           or self._cache_bytes + room > self._CACHE_BYTES):
            old, _ = self._cache.popitem(last=False)
            self._cache_bytes -= self._cache_cost.pop(old)

    def clear_cache(self) -> None:
        """Forget every cached state (benchmarks time cold seeks this way)."""
        self._cache.clear()
        self._cache_cost.clear()
        self._cache_bytes = 0

    def culprits(self, upto: int | None = None) -> tuple[ev.SeqNrBumped, ...]:
        """Every sequence-number increment up to step `upto` (all when None), in order."""
        steps = self._bump_steps if upto is None else self._bump_steps[
            :int(np.searchsorted(self._bump_steps, upto, side="right"))]
        return tuple(self.trace[int(s)] for s in steps)


def _empty_points(trace: Trace, steps: np.ndarray, qevents: _QueueEvents) -> np.ndarray:
    """NOTE [empty queues]: the counts k of queue events such that every queue is empty after the first k."""
    kinds, queues, _, _, rank = qevents.columns
    pushes = kinds == _PUSH
    pops = np.flatnonzero(kinds == _POP)
    code = np.asarray(qevents.pop_push[rank[pops]], dtype=np.int64) if len(pops) else np.zeros(0, np.int64)
    undone = np.where(code < -1, -code - 2, code)  # the step of the push each pop undoes
    c = trace.columns
    if len(pops):
        valid = (undone >= 0) & (undone < steps[pops])
        safe = np.where(valid, undone, 0)
        valid &= (c["ev_kind"][safe] == _PUSH) & (c["ev_a"][safe] == queues[pops])
        if not valid.all():
            return np.zeros(0, dtype=np.int64)
        marks = np.zeros(len(trace), dtype=np.bool_)  # no push undone twice (a mark per step: no sort)
        marks[undone] = True
        if int(np.count_nonzero(marks)) != len(undone):
            return np.zeros(0, dtype=np.int64)
    delta = pushes.astype(np.int64)
    delta[pops] = -1
    return np.flatnonzero(np.cumsum(delta) == 0) + 1


class _QueueEvents:
    """(kind, queue, graph task, node, key or matching push step) of the i-th queue event, made on demand."""

    def __init__(self, trace: Trace, steps: np.ndarray, depth_of: dict[int, int]) -> None:
        c = trace.columns
        kinds = c["ev_kind"][steps]
        # Arrays, read a row at a time: as Python lists (2M events a column for a 1M-node backward) they took
        # 0.27 s before the TUI's first paint, and a replay reads a few rows from a checkpoint on.
        # Per row: kind, queue, task, node, and its row in push_seq (a push) or pop_push (a pop).
        rank = np.where(kinds == _PUSH, np.cumsum(kinds == _PUSH), np.cumsum(kinds == _POP)) - 1
        self.columns = kinds, c["ev_a"][steps], c["ev_task"][steps], c["ev_node"][steps], rank
        self.push_seq, self.pop_push = c["push_seq"], c["pop_push"]
        self.depth_of = depth_of

    def get(self, i: int) -> tuple:
        kind, queue, task, node, rank = (int(col[i]) for col in self.columns)
        extra: Any = None
        if kind == _PUSH:
            code = int(self.push_seq[rank])
            extra = scheduler.wake_up_key() if code == WAKE_UP else \
                scheduler.node_key(self.depth_of.get(task, 0), seq_decode(code))
        elif kind == _POP:
            code = int(self.pop_push[rank])
            extra = -code - 2 if code < -1 else code
        return kind, queue, task, node, extra


def _copy_heaps(heaps: dict) -> dict:
    return {q: [task.clone() for task in heap] for q, heap in heaps.items()}
