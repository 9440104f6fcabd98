"""Replay: the engine's state at any step of a trace, as a frozen EngineState.

Imports numpy and the standard library only.

NOTE [replaying the ready queues]
Each ready queue is replayed with the heap algorithm the engine uses (heapq over items compared by key
alone, see engine/_ready_queue.py), so tie order comes out exactly as recorded. When a graph task is
gone its leftover tasks' depth becomes INT_MAX in place, without re-heapifying, as in the engine. The
outputs of a node are routed (dependency counts decremented) at its NodeFinished step. State at a step
includes that step's event. Checkpoints hold frozen copies every `interval` events; a seek copies the
nearest checkpoint and applies the events after it, so stepping back is just asking for an earlier step.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

import numpy as np

from . import events as ev
from .recorder import K_BUMP, K_DEPS, K_EXEC, K_FINISHED, K_NFINISH, K_NSTART, K_POP, K_PUSH, K_STARTED_TASK
from .trace import Trace, push_priority

INT_MAX = 2**31 - 1
K_BUFFER = ev.KIND_CODES[ev.BufferWritten]
K_ERROR = ev.KIND_CODES[ev.ErrorRaised]


@dataclass(frozen=True, slots=True)
class ReadyTask:
    """A task waiting in a ready queue."""

    node: int | None
    name: str
    seq_nr: int
    priority: tuple[int, int]
    graph_task: int
    pushed_at: int


@dataclass(frozen=True, slots=True)
class QueueState:
    """One ready queue: its tasks in the order they will be popped."""

    name: str
    tasks: tuple[ReadyTask, ...]


@dataclass(frozen=True, slots=True)
class GraphTaskState:
    """A graph task still running: its counts, waiting buffers and pruning."""

    graph_task: int
    reentrant_depth: int
    min_topo_nr: int
    dependencies: tuple[tuple[int, int], ...]  # (node, remaining count)
    not_ready: tuple[tuple[int, tuple[bool, ...]], ...]  # (node, filled slots)
    pruned: tuple[int, ...]  # not expanded: topological_nr < min_topo_nr
    needed: tuple[int, ...]  # exec_info (empty: run everything)
    captured: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EngineState:
    """Everything the engine holds at one step of a trace."""

    step: int
    num_steps: int
    event: ev.Event
    ready_queues: tuple[QueueState, ...]
    graph_tasks: tuple[GraphTaskState, ...]
    executed: tuple[int, ...]  # nodes in execution order, over every graph task so far
    running: tuple[tuple[int, int], ...]  # (thread, node) for nodes between NodeStarted and NodeFinished
    culprits: int  # how many seq_nr bumps happened up to this step (see Replay.culprits)

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


class _Item:
    """A heap entry compared by key alone, like the engine's NodeTask."""

    __slots__ = ("key", "push_step", "graph_task", "node")

    def __init__(self, key: list, push_step: int, graph_task: int, node: int) -> None:
        self.key, self.push_step, self.graph_task, self.node = key, push_step, graph_task, node

    def __lt__(self, other: _Item) -> bool:
        return self.key < other.key


@dataclass
class _Task:
    depth: int = 0
    min_topo: int = 0
    deps: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    pruned: tuple = ()
    needed: tuple = ()
    captured: tuple = ()

    def copy(self) -> _Task:
        return _Task(self.depth, self.min_topo, dict(self.deps), {k: list(v) for k, v in self.buffers.items()},
                     self.pruned, self.needed, self.captured)


class _Machine:
    """Mutable engine state advanced one event at a time (used only inside Replay)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.queues: dict[int, list[_Item]] = {}
        self.tasks: dict[int, _Task] = {}
        self.running: dict[int, int] = {}

    def copy(self) -> _Machine:
        m = _Machine(self.trace)
        m.queues = {q: [_Item(list(i.key), i.push_step, i.graph_task, i.node) for i in heap]
                    for q, heap in self.queues.items()}
        m.tasks = {t: task.copy() for t, task in self.tasks.items()}
        m.running = dict(self.running)
        return m

    def apply(self, step: int) -> None:
        c = self.trace.columns
        kind = int(c["ev_kind"][step])
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, step, int(c["ev_task"][step]), int(c["ev_node"][step]), int(c["ev_a"][step]),
                    int(c["ev_b"][step]), int(c["ev_c"][step]), int(c["ev_thread"][step]))

    def _on_task_started(self, step, task, node, a, b, c, thread):
        self.tasks[task] = _Task(depth=int(self.trace.columns["task_depth"][a]))

    def _on_deps(self, step, task, node, a, b, c, thread):
        e = self.trace[step]
        t = self.tasks.setdefault(task, _Task())
        t.deps, t.min_topo, t.pruned = dict(e.dependencies), e.min_topo_nr, e.pruned

    def _on_exec(self, step, task, node, a, b, c, thread):
        e = self.trace[step]
        t = self.tasks.setdefault(task, _Task())
        t.needed, t.captured = e.needed, tuple(n for n, _, _ in e.captured)

    def _on_push(self, step, task, node, a, b, c, thread):
        depth, seq = push_priority(self.trace, step)
        key = [1, 0, 0] if c == -2 else [2, -depth, -seq]
        heapq.heappush(self.queues.setdefault(a, []), _Item(key, step, task, node))
        t = self.tasks.get(task)
        if t is not None and node >= 0:
            t.buffers.pop(node, None)

    def _on_pop(self, step, task, node, a, b, c, thread):
        heap = self.queues.setdefault(a, [])
        pushed = -c - 2 if c < -1 else c
        if heap and heap[0].push_step == pushed:
            heapq.heappop(heap)
        else:  # a trace from elsewhere whose pops do not follow our heap: remove the recorded one
            for i, item in enumerate(heap):
                if item.push_step == pushed:
                    heap[i] = heap[-1]
                    heap.pop()
                    heapq.heapify(heap)
                    break

    def _on_buffer(self, step, task, node, a, b, c, thread):
        t = self.tasks.get(task)
        if t is None:
            return
        slots = t.buffers.get(node)
        if slots is None:
            slots = t.buffers[node] = [False] * max(int(self.trace.columns["node_inputs"][node]), a + 1)
        slots[a] = True

    def _on_node_started(self, step, task, node, a, b, c, thread):
        self.running[thread] = node

    def _on_node_finished(self, step, task, node, a, b, c, thread):
        self.running.pop(thread, None)
        t = self.tasks.get(task)
        if t is None:
            return
        for child, _ in self.trace.node(node).next_edges:
            if child is None:
                continue
            count = t.deps.get(child)
            if count is None:
                continue
            if count <= 1:
                del t.deps[child]
            else:
                t.deps[child] = count - 1

    def _on_error(self, step, task, node, a, b, c, thread):
        self.running.pop(thread, None)

    def _on_finished(self, step, task, node, a, b, c, thread):
        self.tasks.pop(task, None)
        for heap in self.queues.values():
            for item in heap:
                if item.graph_task == task and item.key[0] == 2:
                    item.key[1] = -INT_MAX  # stale, in place (NOTE [replaying the ready queues])

    def freeze(self, step: int, executed: tuple, culprits: int) -> EngineState:
        trace = self.trace
        queues = []
        for q, heap in sorted(self.queues.items()):
            tasks = []
            heap_copy = list(heap)  # already a heap: popping a shallow copy leaves the machine intact
            while heap_copy:
                item = heapq.heappop(heap_copy)
                prio = (-item.key[1], -item.key[2]) if item.key[0] == 2 else (-1, -1)
                tasks.append(ReadyTask(item.node if item.node >= 0 else None, trace.node_name(item.node),
                                       prio[1], prio, item.graph_task, item.push_step))
            queues.append(QueueState(trace.queues[q], tuple(tasks)))
        gts = tuple(GraphTaskState(tid, t.depth, t.min_topo, tuple(sorted(t.deps.items())),
                                   tuple((n, tuple(s)) for n, s in sorted(t.buffers.items())),
                                   t.pruned, t.needed, t.captured) for tid, t in sorted(self.tasks.items()))
        return EngineState(step, len(trace), trace[step], tuple(queues), gts, executed,
                           tuple(sorted(self.running.items())), culprits)


_HANDLERS = {K_STARTED_TASK: _Machine._on_task_started, K_DEPS: _Machine._on_deps, K_EXEC: _Machine._on_exec,
             K_PUSH: _Machine._on_push, K_POP: _Machine._on_pop, K_BUFFER: _Machine._on_buffer,
             K_NSTART: _Machine._on_node_started, K_NFINISH: _Machine._on_node_finished,
             K_ERROR: _Machine._on_error, K_FINISHED: _Machine._on_finished}


class Replay:
    """`Replay(trace).state_at(step)`: the engine's state just after event `step`, frozen and cached."""

    def __init__(self, trace: Trace, interval: int = 2048) -> None:
        if len(trace) == 0:
            raise ValueError("this trace holds no events, so there is no step to show")
        self.trace = trace
        self.interval = interval
        kinds = trace.columns["ev_kind"]
        self._started_steps = np.flatnonzero(kinds == K_NSTART)
        self._started_nodes = trace.columns["ev_node"][self._started_steps]
        self._bump_steps = np.flatnonzero(kinds == K_BUMP)
        self._checkpoints: list[tuple[int, _Machine]] = []
        self._cache: dict[int, EngineState] = {}
        self._build_checkpoints()

    def _build_checkpoints(self) -> None:
        machine = _Machine(self.trace)
        for step in range(len(self.trace)):
            if step % self.interval == 0:
                self._checkpoints.append((step - 1, machine.copy()))
            machine.apply(step)

    def state_at(self, step: int) -> EngineState:
        """The state after event `step` (0 <= step < len(trace))."""
        n = len(self.trace)
        if not 0 <= step < n:
            raise IndexError(f"step {step} is outside this trace's steps 0..{n - 1}")
        cached = self._cache.get(step)
        if cached is not None:
            return cached
        i = bisect.bisect_right(self._checkpoints, step, key=lambda cp: cp[0]) - 1
        base, machine = self._checkpoints[i]
        machine = machine.copy()
        for s in range(base + 1, step + 1):
            machine.apply(s)
        done = int(np.searchsorted(self._started_steps, step, side="right"))
        executed = tuple(int(n) for n in self._started_nodes[:done])
        culprits = int(np.searchsorted(self._bump_steps, step, side="right"))
        state = machine.freeze(step, executed, culprits)
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[step] = state
        return state

    def culprits(self, upto: int | None = None) -> tuple[ev.SeqNrBumped, ...]:
        """Every sequence-number increment up to step `upto` (all when None), in order."""
        steps = self._bump_steps if upto is None else self._bump_steps[
            :int(np.searchsorted(self._bump_steps, upto, side="right"))]
        return tuple(self.trace[int(s)] for s in steps)

