"""The rows of the TUI's panels, as pure functions of the state at a step: the widgets paint them, `agdb show`
prints them, so the two cannot disagree.

A row holds node indices and numbers, never a name: whoever writes it names the nodes by tracer/views/labels.py
(the widths differ, the names do not). Where a panel marks what changed, the state a step before is an explicit
input (`Replay.state_at(step - 1)`), not something a widget remembers. Imports numpy and the tracer only.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from agdb.tracer.replay.replay import Replay
from agdb.tracer.replay.state import EngineState, ReadyTask
from agdb.tracer.store.trace import Trace


# -- ready queues ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QueueRows:
    """One ready queue: its tasks in the order they will be popped (the head first)."""

    queue: str  # the queue's name (Trace.queue_label says it for people)
    tasks: tuple[ReadyTask, ...]
    is_head_tied: bool  # the head's priority equals the next task's: the heap's shape decides which pops first


def ready_queue_rows(state: EngineState) -> tuple[QueueRows, ...]:
    """Each ready queue of the state, its tasks in pop order."""
    return tuple(QueueRows(q.name, q.tasks, len(q.tasks) > 1 and q.tasks[0].priority == q.tasks[1].priority)
                 for q in state.ready_queues)


# -- dependencies and input buffers ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DependencyRow:
    """A node a running graph task still counts: its remaining count, its input buffer, and whether the count
    differs from the step before."""

    graph_task: int  # the place of its graph task in the state's graph_tasks
    node: int
    count: int
    is_changed: bool
    filled: tuple[bool, ...] | None  # its input buffer's slots (True: a grad is in), None: not waiting


def state_before(replay: Replay, state: EngineState) -> EngineState | None:
    """The state a step before `state`'s, which DependencyRows compares against to mark what changed; None at step 0,
    and when no graph task runs (nothing to mark: no seek is spent)."""
    if state.step == 0 or not state.graph_tasks:
        return None
    return replay.state_at(state.step - 1)


class DependencyRows:
    """The dependencies panel's rows: each running graph task's counted nodes in turn, by node, then the nodes whose
    count reached 0 with grads in their input buffer (the engine is about to push them).

    Only the rows asked for are read (NOTE [counts at a step] in tracer/store/tasks.py): a 1M-node backward counts
    a million nodes. `before` is the state at the step before (None at step 0): a row is changed when its count
    differs from its node's count there.
    """

    def __init__(self, state: EngineState, before: EngineState | None) -> None:
        self.state, self.before = state, before
        self._counted = [gt.num_counted() for gt in state.graph_tasks]
        self._to_push = [_to_push(gt) for gt in state.graph_tasks]
        sizes = [c + len(p) for c, p in zip(self._counted, self._to_push, strict=True)]
        self.offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        """The first row of each graph task's nodes, and the row count."""
        same = before is not None and [gt.graph_task for gt in before.graph_tasks] == \
            [gt.graph_task for gt in state.graph_tasks]
        # A task's counted nodes only shrink as it runs: the same tasks counting as many nodes count the same ones.
        self._same_rows = same and [gt.num_counted() for gt in before.graph_tasks] == \
            self._counted  # type: ignore[union-attr]

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def rows(self, lo: int, hi: int) -> list[DependencyRow]:
        """Rows lo..hi-1 (fewer past the end)."""
        out: list[DependencyRow] = []
        hi = min(hi, len(self))
        while lo < hi:
            k = int(np.searchsorted(self.offsets, lo, side="right")) - 1
            first, end = int(self.offsets[k]), min(hi, int(self.offsets[k + 1]))
            out.extend(self._task_rows(k, lo - first, end - first))
            lo = end
        return out

    def of_node(self, node: int) -> list[DependencyRow]:
        """The rows of `node` (one per graph task that counts it or is about to push it)."""
        out = []
        for k, gt in enumerate(self.state.graph_tasks):
            if int(gt.counts_of(np.asarray([node]))[0]) > 0:
                i = int(np.searchsorted(gt.dependency_arrays()[0], node))
            elif node in self._to_push[k]:
                i = self._counted[k] + int(np.searchsorted(self._to_push[k], node))
            else:
                continue
            out.extend(self._task_rows(k, i, i + 1))
        return out

    def _task_rows(self, k: int, lo: int, hi: int) -> list[DependencyRow]:
        """Rows lo..hi-1 of graph task k: its counted nodes, then the ones it is about to push."""
        gt, counted = self.state.graph_tasks[k], self._counted[k]
        nodes, counts = gt.counted_rows(lo, min(hi, counted))
        if hi > counted:
            pushing = self._to_push[k][max(lo - counted, 0):hi - counted]
            nodes = np.concatenate([nodes, pushing]).astype(np.int64)
            counts = np.concatenate([counts, np.zeros(len(pushing), dtype=np.int64)])
        changed = self._changed(k, nodes, counts)
        waiting = np.isin(nodes, gt.waiting_nodes())
        return [DependencyRow(k, node, count, moved, gt.filled_slots(node) if wait else None)
                for node, count, moved, wait in zip(nodes.tolist(), counts.tolist(), changed.tolist(),
                                                    waiting.tolist(), strict=True)]

    def _changed(self, k: int, nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Whether each count of graph task k's rows differs from its node's count the step before: the same task's
        when the tasks are the step before's, else the node's in the first task that counted it then, if any."""
        before = self.before
        if before is None:
            return np.zeros(len(nodes), dtype=bool)
        if self._same_rows:
            return before.graph_tasks[k].counts_of(nodes) != counts
        changed = np.zeros(len(nodes), dtype=bool)
        open_ = np.ones(len(nodes), dtype=bool)  # no row of the node found yet
        for gt in before.graph_tasks:
            was = gt.counts_of(nodes)
            found = open_ & (was > 0)
            changed[found] = was[found] != counts[found]
            open_ &= ~found
        return changed


def _to_push(gt) -> np.ndarray:
    """The nodes of a graph task whose count reached 0 while grads wait in their input buffer, by node."""
    waiting = np.asarray(gt.waiting_nodes(), dtype=np.int64)
    if not len(waiting):
        return waiting
    return np.sort(waiting[gt.counts_of(waiting) == 0])


# -- pruning --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PruningRows:
    """What topological_nr pruning and exec_info removed from one graph task's run."""

    graph_task: int
    reentrant_depth: int
    min_topo_nr: int
    pruned: tuple[tuple[int, int], ...]  # (node, its topological_nr), below min_topo_nr
    needed: tuple[int, ...]
    captured: tuple[int, ...]
    finished_at: int | None  # None: the task runs; else the step it finished at (the last one that pruned)
    skipped: tuple[int, ...] = ()  # counted, but neither needed nor captured by exec_info (and not pruned): never run


def pruning_rows(trace: Trace, state: EngineState) -> tuple[PruningRows, ...]:
    """Per running graph task, its pruning and exec_info; when none runs, the last graph task that pruned and had
    finished by the step (its nodes stay `pruned` in the graph: NOTE [pruning as history] in node_states), if any."""
    topo = trace.columns["node_topo"]

    def with_topo(nodes) -> tuple[tuple[int, int], ...]:
        return tuple((int(n), int(topo[n])) for n in nodes)

    if state.graph_tasks:
        return tuple(PruningRows(gt.graph_task, gt.reentrant_depth, gt.min_topo_nr, with_topo(gt.pruned),
                                 tuple(gt.needed), tuple(gt.captured), None, _skipped(gt))
                     for gt in state.graph_tasks)
    ended, tasks = _pruning_tasks(trace)
    i = bisect.bisect_right(ended, state.step)
    if not i:
        return ()
    tid = tasks[i - 1]
    task = trace.index.tasks[tid]
    return (PruningRows(tid, task.depth, task.min_topo, with_topo(task.pruned), (), (), task.end),)


def _skipped(gt) -> tuple[int, ...]:
    """The nodes a graph task counted that exec_info does not need (the graph panel's `skipped`), by node id."""
    if not (gt.needed or gt.captured):
        return ()  # no exec_info: every counted node runs
    nodes, _ = gt.dependency_arrays()
    kept = np.asarray([*gt.needed, *gt.captured, *gt.pruned], dtype=np.int64)
    return tuple(np.sort(nodes[~np.isin(nodes, kept)]).tolist())


def _pruning_tasks(trace: Trace) -> tuple[list[int], list[int]]:
    """The graph tasks that pruned, by the step they finished: (those steps, the tasks), kept in the trace's index."""
    def compute() -> tuple[list[int], list[int]]:
        ended = sorted((t.end, tid) for tid, t in trace.index.tasks.items() if t.pruned)
        return [end for end, _ in ended], [tid for _, tid in ended]

    return trace.index.memo("replay.rows.pruning_tasks", compute)


# -- forward ops ----------------------------------------------------------------------------------------------
def forward_rows_made(made_steps: np.ndarray, state: EngineState) -> int:
    """How many of the forward ops (rows in the order they were made: `made_steps` ascending) were made by the
    step; the later ones are dimmed."""
    return int(np.searchsorted(made_steps, state.step, side="right"))
