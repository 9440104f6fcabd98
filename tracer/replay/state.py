"""The engine's state at one step of a trace: frozen records the Replay hands out and the UI reads.

Never imports the engine, textual or rich.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from agdb.tracer.store import events as ev


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
    """A graph task still running: remaining counts, waiting buffers, pruning and exec_info.

    The counts are read through `counts` (tracer.store.tasks.TaskCounts): a view reads the few it shows (NOTE [counts
    at a step] in indexes), and the whole arrays are made only when asked for.
    """

    __slots__ = ("graph_task", "reentrant_depth", "min_topo_nr", "_counts", "_waiting", "_slots", "pruned",
                 "needed", "captured")

    def __init__(self, graph_task: int, reentrant_depth: int, min_topo_nr: int, counts: Any, waiting: np.ndarray,
                 slots: Any, pruned: tuple, needed: tuple, captured: tuple) -> None:
        self.graph_task, self.reentrant_depth, self.min_topo_nr = graph_task, reentrant_depth, min_topo_nr
        self._counts, self._waiting, self._slots = counts, waiting, slots
        self.pruned, self.needed, self.captured = pruned, needed, captured

    @property
    def dependencies(self) -> tuple[tuple[int, int], ...]:
        """(node, remaining count) of every node still counted, by node."""
        nodes, counts = self.dependency_arrays()
        return tuple(zip(nodes.tolist(), counts.tolist(), strict=True))

    def dependency_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The same as two read-only arrays (nodes, counts): made once, as large as the task's counted nodes."""
        return self._counts.arrays()

    def num_counted(self) -> int:
        """How many nodes are still counted (rows of dependency_arrays), without making the arrays."""
        return self._counts.num_counted()

    def counted_rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, counts) of rows lo..hi-1 of dependency_arrays, without making them all."""
        return self._counts.rows(lo, hi)

    def counts_of(self, nodes: np.ndarray) -> np.ndarray:
        """The remaining count of each of these nodes; 0 for a node not (or no longer) counted."""
        return self._counts.counts_of(nodes)

    def counted_span(self) -> tuple[int, int, np.ndarray] | None:
        """(lo, hi, holes): the counted nodes are lo..hi-1 but `holes`; None when they are not read that way."""
        return self._counts.counted_span()

    @property
    def not_ready(self) -> tuple[tuple[int, tuple[bool, ...]], ...]:
        """(node, filled slots) of every node whose input buffer waits for more grads."""
        return tuple((int(n), self._slots(int(n))) for n in self._waiting)

    def waiting_nodes(self) -> np.ndarray:
        """The nodes of not_ready as a read-only array."""
        return self._waiting

    def filled_slots(self, node: int) -> tuple[bool, ...]:
        """Which input slots of waiting `node` hold a grad (one entry of not_ready, without building them all)."""
        return self._slots(int(node))

    def _key(self) -> tuple:
        nodes, counts = self.dependency_arrays()
        return (self.graph_task, self.reentrant_depth, self.min_topo_nr, nodes.tolist(), counts.tolist(),
                self.not_ready, self.pruned, self.needed, self.captured)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphTaskState) and self._key() == other._key()

    def nbytes(self) -> int:
        """Bytes of the arrays this state holds (what the Replay's cache weighs it by)."""
        return self._counts.nbytes() + self._waiting.nbytes

    def __repr__(self) -> str:
        return (f"GraphTaskState({self.graph_task}, depth={self.reentrant_depth}, {self.num_counted()} counted, "
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
