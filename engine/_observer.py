"""Instrumentation points: what the engine reports to attached observers.

The engine calls these points where PyTorch does the work; with
no observer attached each point costs one truth test of `observers`.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._engine import GraphTask, InputBuffer, NodeTask
    from ._node import Node
    from ._tensor import Tensor

observers: list[Any] = []
"""The attached observers, in attach order. Empty unless someone is watching."""


class EngineObserver(Protocol):
    """What an observer may implement; every method is optional (missing ones are skipped).

    Every point is called on the thread doing the work: the caller of backward for CPU nodes, the
    device's worker (`pt_autograd_N`) for a cuda:N node, a pool thread for reentrant backward past
    MAX_DEPTH. `threading.get_ident()` inside a method identifies it; queue points also get the
    ReadyQueue (`queue.name` is `cuda:N`, or `cpu:<thread id>` for a thread's own CPU queue). Observers
    that keep state must lock: several threads call them at once.
    """

    def seq_nr_bumped(self, node: Node, seq_nr: int) -> None:
        """`node` took `seq_nr` from this thread's counter, which is now `seq_nr + 1`."""

    def node_created(self, node: Node) -> None:
        """`node` was created and its next edges attached."""

    def graph_task_started(self, graph_task: GraphTask) -> None:
        """A backward or grad call built `graph_task`, before computing dependencies."""

    def dependencies_computed(self, graph_task: GraphTask, min_topo_nr: int, pruned: list[Node]) -> None:
        """compute_dependencies finished; `pruned` are the nodes not expanded because topo < min."""

    def exec_info_computed(self, graph_task: GraphTask) -> None:
        """init_to_execute finished; graph_task.exec_info holds needed and captured nodes."""

    def task_pushed(self, graph_task: GraphTask | None, task: NodeTask, queue: Any) -> None:
        """`task` was pushed onto ready queue `queue` (after the push)."""

    def task_popped(self, graph_task: GraphTask | None, task: NodeTask, queue: Any) -> None:
        """`task` was popped from `queue` (after the pop). Popped right after another node ran, it is reported
        with that node's grad mode, current graph task and current node still set on the thread
        (engine/_engine.thread_main)."""

    def buffer_written(self, graph_task: GraphTask, node: Node, slot: int, is_accumulation: bool,
                       buffer: InputBuffer) -> None:
        """A grad reached input slot `slot` of `node`: the first write, or a summation into it."""

    def buffer_written_and_task_pushed(self, graph_task: GraphTask, node: Node, slot: int, is_accumulation: bool,
                                       buffer: InputBuffer, task: NodeTask, queue: Any) -> None:
        """buffer_written, then task_pushed of the task that the write made ready (`task.graph_task` is None once
        `graph_task` is gone), in one call: the engine makes it where nothing can happen between the two (NOTE
        [fused points])."""

    def hook_ran(self, graph_task: GraphTask | None, node: Node, kind: str, hook: Any) -> None:
        """A hook of `kind` (tensor_pre, retains_grad, pre, post, post_accumulate_grad) returned; one that
        raises is reported by error_raised instead."""

    def node_started(self, graph_task: GraphTask, node: Node, inputs: list) -> None:
        """`node`'s apply is about to run on `inputs` (its grads after the pre-hooks). For a node the engine reports
        with its pop (task_popped_and_started), the thread's grad mode, current graph task and current node are then
        still those task_popped sees."""

    def task_popped_and_started(self, graph_task: GraphTask, task: NodeTask, queue: Any, inputs: list) -> None:
        """task_popped, then node_started of `task.fn` on `inputs`, in one call: the engine makes it where nothing
        can happen between the two (NOTE [fused points]). Called at the pop, with the thread's grad mode, current
        graph task and current node as task_popped sees them."""

    def node_finished(self, graph_task: GraphTask, node: Node, outputs: list) -> None:
        """`node`'s apply returned `outputs` (after validation and post-hooks)."""

    def grad_captured(self, graph_task: GraphTask, node: Node, output_index: int, grad: Any) -> None:
        """An `autograd.grad` result slot was written."""

    def grad_accumulated(self, graph_task: GraphTask | None, node: Node, variable: Any, grad: Any) -> None:
        """AccumulateGrad wrote `variable.grad`."""

    def error_raised(self, graph_task: GraphTask, node: Node | None, error: BaseException) -> None:
        """The first error of `graph_task`."""

    def graph_task_finished(self, graph_task: GraphTask) -> None:
        """`graph_task` is over: its backward call returned or raised; its leftover tasks are now stale."""

    def op_called(self, call: OpCall) -> None:
        """A public op returned; reported once per user-visible call, after it (NOTE [op_called] in
        engine/_dispatch.py)."""


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """A tensor as an op saw it: its stable id and what it looked like at that moment."""

    uid: int
    """`tensor_uid(t)`: unique in the process, never reused, never Python's id()."""
    shape: tuple[int, ...]
    dtype: str
    """PyTorch's dtype name without `torch.`: float32, float64, int64, bool."""
    device: str
    """cpu, cuda:0, ..."""
    requires_grad: bool
    version: int
    """The memory's in-place write count (`t._version`): an in-place op's output has its input's uid and a
    higher version."""


@dataclass(frozen=True, slots=True)
class OpCall:
    """One call of a public op, as `op_called` reports it."""

    name: str
    """PyTorch's op name: mul, add_, matmul, sum, rsub, numpy_T (`x.T`), linear (nn.functional.linear)."""
    inputs: tuple[TensorMeta, ...]
    """The tensor arguments, in argument order (self first for methods and operators, so `2 - x` has one
    input); lists such as cat's are flattened. Taken before the op ran."""
    outputs: tuple[TensorMeta, ...]
    """The tensors returned: one, or each of a tuple's (max(dim) returns values and indices)."""
    node: Node | None
    """The node autograd recorded for the outputs (their new grad_fn), or None: grad mode off, no input
    requires grad, the op does not record (comparisons), or it returned an input unchanged."""
    backward_node: Node | None
    """The node whose backward this thread was running when the op was called (the op came from a hook or a
    custom Function's backward), or None for an op called outside backward."""
    input_tensors: tuple[Tensor, ...]
    """The live input tensors, for previews; read them during the call only (they may change later)."""
    output_tensors: tuple[Tensor, ...]
    """The live output tensors, likewise."""
    args: tuple = ()
    """The call's positional arguments as given (tensors, scalars, lists), for FX capture; read during the call."""
    kwargs: dict | None = None
    """The call's keyword arguments as given, or None."""
    impl: Any = None
    """The implementation that ran (an op name can have several: `Tensor.sum` and `engine.sum` differ), so that
    a recorded call can be run again exactly."""


_uids = itertools.count(1)
_uid_lock = threading.Lock()


def tensor_uid(t: Tensor) -> int:
    """`t`'s stable id: taken from a per-process counter the first time anyone asks, so unobserved
    programs pay nothing and the same program numbers its tensors the same way."""
    uid = getattr(t, "_uid", 0)
    if uid:
        return uid
    with _uid_lock:  # two threads may ask for the same new tensor at once
        uid = getattr(t, "_uid", 0)
        if not uid:
            uid = t._uid = next(_uids)
        return uid


def tensor_meta(t: Tensor) -> TensorMeta:
    """What TensorMeta records of `t` now."""
    data = t._data
    return TensorMeta(tensor_uid(t), data.shape, t.dtype.name, t._device, t._requires_grad, t._version)


_attach_lock = threading.Lock()
op_watchers: list[Any] = []
"""The bound `op_called` methods of the attached observers: empty while none watches ops (a Recorder does not),
so that ops then cost one truth test even while other points are observed."""
dispatch: dict[str, list] = {}
"""Per instrumentation point, the bound methods of the observers that implement it (rebuilt on attach).
The engine's per-task points iterate `dispatch.get(point, ())` inline rather than calling notify()."""


# NOTE [fused points]
# A backward node is popped and started, and each grad that makes a node ready is written and pushed, with only
# engine code in between: no hook, no op, nothing reported. There the engine makes one call of a fused point
# instead of two, the cost of a call being most of what a cheap observer pays for a point. Elsewhere (a node with
# hooks, a graph task with exec_info, a pop that waited, a push to another device's queue) it calls the two points.
# An observer that does not implement a fused point gets its two points from an adapter, in the same order, so
# every observer sees the same events whichever the engine calls.
_FUSED = {"task_popped_and_started": ("task_popped", "node_started"),
          "buffer_written_and_task_pushed": ("buffer_written", "task_pushed")}


def _popped_and_started(popped: Any, started: Any) -> Any:
    def task_popped_and_started(graph_task: Any, task: Any, queue: Any, inputs: list) -> None:
        if popped is not None:
            popped(graph_task, task, queue)
        if started is not None:
            started(graph_task, task.fn, inputs)
    return task_popped_and_started


def _written_and_pushed(written: Any, pushed: Any) -> Any:
    def buffer_written_and_task_pushed(graph_task: Any, node: Any, slot: int, is_accumulation: bool, buffer: Any,
                                       task: Any, queue: Any) -> None:
        if written is not None:
            written(graph_task, node, slot, is_accumulation, buffer)
        if pushed is not None:
            pushed(task.graph_task, task, queue)
    return buffer_written_and_task_pushed


_ADAPTERS = {"task_popped_and_started": _popped_and_started, "buffer_written_and_task_pushed": _written_and_pushed}


def _rebuild_with(new_observers: list) -> None:
    # Build new tables and swap them in, so threads notifying meanwhile see the old set or the new one.
    global dispatch
    table: dict[str, list] = {}
    for observer in new_observers:
        for point in _POINTS:
            method = getattr(observer, point, None)
            if method is None and point in _FUSED:  # NOTE [fused points]
                parts = [getattr(observer, part, None) for part in _FUSED[point]]
                if any(part is not None for part in parts):
                    method = _ADAPTERS[point](*parts)
            if method is not None:
                table.setdefault(point, []).append(method)
    dispatch = table
    observers[:] = new_observers  # the engine's `if observers:` test reads this list
    op_watchers[:] = table.get("op_called", ())  # the op wrappers' test reads this one (NOTE [op_called])


class ObserverHandle:
    """Returned by `add_observer`; `.remove()` detaches the observer, like a hook handle."""

    __slots__ = ("_observer",)

    def __init__(self, observer: Any) -> None:
        self._observer = observer

    def remove(self) -> None:
        """Detach the observer; calling it twice is harmless."""
        with _attach_lock:
            _rebuild_with([o for o in observers if o is not self._observer])

    def __enter__(self) -> ObserverHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def add_observer(observer: Any) -> ObserverHandle:
    """Attach `observer` to the engine's instrumentation points; returns a removable handle."""
    with _attach_lock:
        _rebuild_with(observers + [observer])
    return ObserverHandle(observer)


def notify(point: str, *args: Any) -> None:
    """Call `point` on every attached observer that implements it. Callers test `observers` first."""
    for method in dispatch.get(point, ()):
        method(*args)


_POINTS = tuple(name for name in EngineObserver.__dict__ if not name.startswith("_"))
