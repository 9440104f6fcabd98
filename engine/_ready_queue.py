"""Ready queues: NodeTask, ReadyQueue and InputBuffer.

NOTE [ready queue order]
A ReadyQueue is a max-heap on (reentrant depth, seq_nr) (engine-semantics §6.1); tasks with equal keys leave in
the order libstdc++'s std::priority_queue gives them (engine-semantics §6.2), which is neither FIFO nor stable.
Python's heapq makes exactly the same moves as libstdc++'s push_heap/pop_heap when items compare by
their key alone: sift-up on a strict comparison, and on pop a hole walked to a leaf through the child
that is not strictly better on the left (the right one on ties). So NodeTask compares by key only, with
no insertion counter; tests/engine/test_ready_queue.py checks this against a model of libstdc++.
"""
from __future__ import annotations

import heapq
import threading
from typing import TYPE_CHECKING, Any

from . import _observer
from ._state import tls
from ._tensor import make_tensor

if TYPE_CHECKING:
    from ._graph_task import GraphTask
    from ._node import Node

INT_MAX = 2**31 - 1


class NodeTask:
    """A node ready to run, with its gathered input grads; ordered by `key` alone (NOTE [ready queue order])."""

    __slots__ = ("owner", "fn", "inputs", "key", "is_shutdown")

    def __init__(self, graph_task: GraphTask | None, fn: Node | None, inputs: InputBuffer | None,
                 is_shutdown: bool = False) -> None:
        self.owner = graph_task
        self.fn = fn
        self.inputs = inputs
        self.is_shutdown = is_shutdown
        # heapq pops the smallest key: shutdown, then dummy (null fn) tasks, then real ones by largest
        # depth and then largest seq_nr. A list, so a gone GraphTask can raise its tasks' depth in place.
        if is_shutdown:
            self.key = [0, 0, 0]
        elif fn is None:
            self.key = [1, 0, 0]
        else:
            self.key = [2, -graph_task.reentrant_depth, -fn._seq]

    def __lt__(self, other: NodeTask) -> bool:
        return self.key < other.key

    @property
    def graph_task(self) -> GraphTask | None:
        """The task's GraphTask, or None once it is gone (its backward call has returned or raised)."""
        owner = self.owner
        return None if owner is None or owner.gone else owner

    @property
    def priority(self) -> tuple[int, int]:
        """(reentrant depth, seq_nr) as the queue compares them now; dummy tasks report (-1, -1)."""
        if self.fn is None:
            return (-1, -1)
        return (-self.key[1], -self.key[2])


class ReadyQueue:
    """A thread-safe priority queue of NodeTasks (one per CPU thread and one per device)."""

    __slots__ = ("heap", "cond", "name")

    def __init__(self, name: str) -> None:
        self.heap: list[NodeTask] = []
        self.cond = threading.Condition(threading.Lock())
        self.name = name

    def push(self, task: NodeTask, increment_outstanding: bool = True) -> None:
        """Push `task`, counting it against its GraphTask (engine-semantics §3.6)."""
        if increment_outstanding and not task.is_shutdown:
            gt = task.owner
            if gt is not None and not gt.gone:
                with gt.mutex:
                    gt.outstanding_tasks += 1
        with self.cond:
            heapq.heappush(self.heap, task)
            self.cond.notify()
        if _observer.observers:
            for hook in _observer.dispatch.get("task_pushed", ()):
                hook(task.graph_task, task, self)

    def pop(self) -> NodeTask:
        """Take the highest-priority task, waiting for one if the queue is empty."""
        with self.cond:
            while not self.heap:
                self.cond.wait()
            task = heapq.heappop(self.heap)
        if _observer.observers:
            for hook in _observer.dispatch.get("task_popped", ()):
                hook(task.graph_task, task, self)
        return task

    def __len__(self) -> int:
        return len(self.heap)


class InputBuffer:
    """The grads gathered for one node, one slot per input; later writes to a slot are summed."""

    __slots__ = ("buffer",)

    def __init__(self, size: int) -> None:
        self.buffer: list = [None] * size

    def add(self, pos: int, var: Any) -> bool:
        """Add `var` at slot `pos`; returns True when it was summed into an earlier grad (engine-semantics §5.1)."""
        if var is None:
            return False
        old = self.buffer[pos]
        if old is None:
            self.buffer[pos] = var
            return False
        self.buffer[pos] = _accumulate(old, var)
        return True


def _accumulate(old: Any, var: Any) -> Any:
    """old + var: recorded (AddBackward0) in grad mode, else a plain numpy sum."""
    if tls.grad_enabled:
        from ._ops import add

        return add(old, var)  # not `old + var`: the engine's own op, which observers are not told of
    res = old._data + var._data
    if res.dtype != old._data.dtype:
        res = res.astype(old._data.dtype)
    return make_tensor(res, device=old._device)
