"""Ready queues: NodeTask, ReadyQueue and InputBuffer.

NOTE [ready queue order]
A ReadyQueue is a max-heap on (reentrant depth, seq_nr) (engine-semantics §6.1); tasks with equal keys leave in
the order libstdc++'s std::priority_queue gives them (engine-semantics §6.2), which is neither FIFO nor stable.
Python's heapq makes exactly the same moves as libstdc++'s push_heap/pop_heap when items compare by
their key alone: sift-up on a strict comparison, and on pop a hole walked to a leaf through the child
that is not strictly better on the left (the right one on ties). So NodeTask compares by key only, with
no insertion counter; tests/engine/test_ready_queue.py checks this against a model of libstdc++.

NOTE [interrupts in the engine]
A KeyboardInterrupt (Ctrl-C, or the TUI cancelling a script) can land at any bytecode that calls or jumps,
so every step that must not be cut in half is made of C calls that run no Python code:
- a queue's lock is taken with `with self.lock:` on the raw lock (its C `__enter__` either takes it or
  raises without it), never through `threading.Condition.__enter__`, a Python function that can be
  interrupted after taking the lock and so leave it held for ever;
- a NodeTask *is* its key (a list), so heapq compares tasks in C: no `__lt__` runs inside a heap operation,
  and an interrupted push or pop cannot leave the heap half-sifted or drop the task it was returning;
- a waiting consumer sleeps in `SimpleQueue.get()` (C), woken by a token the pusher puts while it still
  holds the lock; an interrupted wait consumes nothing and leaves no waiter behind.
A backward that is interrupted ends with the KeyboardInterrupt as its error (thread_main turns it into the
graph task's error, as any error of a node), and the next backward on the thread starts from a usable queue.
"""
from __future__ import annotations

import heapq
import queue as _queue
import sys
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _observer, _version
from ._layout import is_non_overlapping_and_dense, tensor_iterator_layout
from ._state import tls
from ._tensor import make_tensor

if TYPE_CHECKING:
    from ._graph_task import GraphTask
    from ._node import Node

INT_MAX = 2**31 - 1


class NodeTask(list):
    """A node ready to run, with its gathered input grads. The list is its key, and tasks are ordered by the
    key alone (NOTE [ready queue order]); list comparison runs in C (NOTE [interrupts in the engine])."""

    __slots__ = ("owner", "fn", "inputs", "is_shutdown")

    def __init__(self, graph_task: GraphTask | None, fn: Node | None, inputs: InputBuffer | None,
                 is_shutdown: bool = False) -> None:
        self.owner = graph_task
        self.fn = fn
        self.inputs = inputs
        self.is_shutdown = is_shutdown
        # heapq pops the smallest key: shutdown, then dummy (null fn) tasks, then real ones by largest
        # depth and then largest seq_nr. Mutable, so a gone GraphTask can raise its tasks' depth in place.
        if is_shutdown:
            self += (0, 0, 0)
        elif fn is None:
            self += (1, 0, 0)
        else:
            self += (2, -graph_task.reentrant_depth, -fn._seq)

    # A task is one object, not a value: equal keys must not make two tasks equal (`in`, `remove`).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    @property
    def key(self) -> list:
        """[kind, -reentrant depth, -seq_nr]: kind 0 shutdown, 1 dummy (no fn), 2 a node."""
        return self

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
        return (-self[1], -self[2])


_new_list = list.__new__


class ReadyQueue:
    """A thread-safe priority queue of NodeTasks (one per CPU thread and one per device); one thread pops."""

    __slots__ = ("heap", "lock", "name", "_waiting", "_wake")

    def __init__(self, name: str) -> None:
        self.heap: list[NodeTask] = []
        self.lock = threading.Lock()
        self.name = name
        self._waiting = False  # the popping thread is asleep in _wake.get() (or about to be)
        self._wake: _queue.SimpleQueue = _queue.SimpleQueue()

    def push(self, task: NodeTask, increment_outstanding: bool = True) -> None:
        """Push `task`, counting it against its GraphTask (engine-semantics §3.6)."""
        if increment_outstanding and not task.is_shutdown:
            gt = task.owner
            if gt is not None and not gt.gone:
                with gt.mutex:
                    gt.outstanding_tasks += 1
        with self.lock:  # NOTE [interrupts in the engine]: wake first, so no interrupt can push unannounced
            if self._waiting:
                self._waiting = False
                self._wake.put(None)
            heapq.heappush(self.heap, task)
        if _observer.observers:
            for hook in _observer.dispatch.get("task_pushed", ()):
                hook(task.graph_task, task, self)

    def push_node(self, graph_task: GraphTask, fn: Node, inputs: InputBuffer, slot: int = -1,
                  is_accumulation: bool = False) -> None:
        """push(NodeTask(graph_task, fn, inputs)) for a node, in one call and without the constructor's branches: the
        engine pushes every node it makes ready so, holding graph_task.mutex (which push() would take to count the
        task). `slot` >= 0: the write to that input slot made the node ready and is reported with the push
        (buffer_written_and_task_pushed, NOTE [fused points] in engine/_observer.py)."""
        task = _new_list(NodeTask)
        task.owner = graph_task
        task.fn = fn
        task.inputs = inputs
        task.is_shutdown = False
        task.extend((2, -graph_task.reentrant_depth, -fn._seq))
        if not graph_task.gone:
            graph_task.outstanding_tasks += 1  # under the caller's graph_task.mutex
        with self.lock:  # as push()
            if self._waiting:
                self._waiting = False
                self._wake.put(None)
            heapq.heappush(self.heap, task)
        if _observer.observers:
            if slot >= 0:
                for hook in _observer.dispatch.get("buffer_written_and_task_pushed", ()):
                    hook(graph_task, fn, slot, is_accumulation, inputs, task, self)
                return
            for hook in _observer.dispatch.get("task_pushed", ()):
                hook(None if graph_task.gone else graph_task, task, self)  # task.graph_task

    def pop(self) -> NodeTask:
        """Take the highest-priority task, waiting for one if the queue is empty."""
        while True:
            with self.lock:
                if self.heap:
                    task = heapq.heappop(self.heap)
                    break
                self._waiting = True
            self._wake.get()  # a token left by an interrupted wait only costs one more look at the heap
        if _observer.observers:
            for hook in _observer.dispatch.get("task_popped", ()):
                hook(task.graph_task, task, self)
        return task

    def __len__(self) -> int:
        return len(self.heap)


_OLD_REFS = 4  # add()'s `old`, _accumulate's and _sole_owner's parameters, getrefcount's argument


def _add_into(target: Any, other: Any) -> Any:
    """target.add_(other) on a buffer grad: its memory reused, its version counted."""
    np.add(target._data, other._data, out=target._data, casting="unsafe")
    _version.bump(target._data)
    return target


def _sole_owner(t: Any, refs: int) -> bool:
    """torch's can_accumulate_inplace: nothing else holds the tensor or its memory (use_count and the storage's
    use_count are 1), it is dense and non-overlapping, and mutable (not a ZeroTensor)."""
    data = t._data
    if (sys.getrefcount(t) > refs or not data.flags.writeable or t._zerotensor
            or not (data.flags.c_contiguous or data.flags.f_contiguous or is_non_overlapping_and_dense(data))
            or sys.getrefcount(data) > 3):
        return False
    # The memory is shared when an array it views is held by anything but the view below it (a grad that
    # was viewed, then dropped, as sum_to's result, is not: its storage's use_count is 1).
    arr = data
    while arr.base is not None:
        base = arr.base
        if not isinstance(base, np.ndarray) or sys.getrefcount(base) > 3:  # arr.base, `base`, the argument
            return False
        arr = base
    return True


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
        self.buffer[pos] = None  # so that the buffer's reference does not count against summing in place
        self.buffer[pos] = _accumulate(old, var)
        return True


def _accumulate(old: Any, var: Any) -> Any:
    """old + var: recorded (AddBackward0) in grad mode; else summed in place into `old` when nothing else holds
    it (its version goes up, as torch's `old_var.add_(var)`), or a plain numpy sum."""
    if tls.grad_enabled:
        from ._ops import add

        return add(old, var)  # not `old + var`: the engine's own op, which observers are not told of
    # torch reuses only the grad already in the buffer, never the new one, and only when nothing else holds it:
    # not when the new one is the same tensor (AddBackward0 of x + x passes one grad to both edges)
    if old is not var and _sole_owner(old, _OLD_REFS):
        return _add_into(old, var)
    res = np.asarray(old._data + var._data)  # 0-dim arrays add to a numpy scalar, which is read-only
    if res.dtype != old._data.dtype:
        res = res.astype(old._data.dtype)
    # torch's `old_var + var` is laid out by TensorIterator, after `old` first; numpy's sum of mixed layouts is C
    res = tensor_iterator_layout(res, (old._data, var._data))
    out = make_tensor(res, device=old._device)
    if old._zerotensor and var._zerotensor:  # torch: a sum of ZeroTensors is one (immutable: never summed into)
        out._zerotensor = True
    return out
