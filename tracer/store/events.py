"""Trace events: frozen records of ints, strs and tuples, one type per kind of engine event.

Never imports the engine, textual or rich. A record never holds a live engine
object: a node appears as its index in the trace's node table (`node`) and its name, a tensor as a
TensorSummary. `thread` indexes `Trace.threads`; `graph_task` numbers the trace's graph tasks 1, 2, ... in
the order they appear (0 outside backward). Records define `__rich_repr__` (a plain generator) so a
debugger prints them nicely.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterator, Union

from agdb.tracer.store.schema import Kind


class _Repr:
    """Mixin: rich's repr protocol without importing rich."""

    __slots__ = ()

    def __rich_repr__(self) -> Iterator[tuple[str, object]]:
        for f in fields(self):  # type: ignore[arg-type]
            yield f.name, getattr(self, f.name)


@dataclass(frozen=True, slots=True)
class TensorSummary(_Repr):
    """What a trace keeps of a tensor: shape, dtype, device, the first few values and NaN/inf flags."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    preview: tuple[float, ...]
    has_nan: bool
    has_inf: bool


@dataclass(frozen=True, slots=True)
class SeqNrBumped(_Repr):
    """The thread's sequence number was incremented: `node` took `old`, the counter is now `seq_nr`."""

    step: int
    thread: int
    node: int
    node_name: str
    old: int
    seq_nr: int
    filename: str  # the user's Python line that caused the bump
    lineno: int
    function: str
    source: str
    col: int = -1  # source[col:end_col] is the expression that caused it (-1: unknown)
    end_col: int = -1


@dataclass(frozen=True, slots=True)
class NodeCreated(_Repr):
    """A backward node was created, with its next edges attached."""

    step: int
    thread: int
    node: int
    name: str
    seq_nr: int
    topological_nr: int
    next_edges: tuple[tuple[int | None, int], ...]  # (node or None, input_nr) per slot
    device: str
    forward_op: str
    filename: str
    lineno: int
    function: str
    source: str
    col: int = -1  # source[col:end_col] is the expression that made it (-1: unknown)
    end_col: int = -1


@dataclass(frozen=True, slots=True)
class GraphTaskStarted(_Repr):
    """backward() or autograd.grad() built a graph task."""

    step: int
    thread: int
    graph_task: int
    graph_root: int
    roots: tuple[tuple[int, int], ...]
    inputs: tuple[tuple[int, int], ...]  # `inputs=` of backward, or grad's inputs, as (node, input_nr)
    keep_graph: bool
    create_graph: bool
    accumulate_grad: bool
    reentrant_depth: int


@dataclass(frozen=True, slots=True)
class DependenciesComputed(_Repr):
    """compute_dependencies: the count of each node, and the nodes not expanded because topo < min."""

    step: int
    thread: int
    graph_task: int
    min_topo_nr: int
    dependencies: tuple[tuple[int, int], ...]  # (node, count)
    pruned: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ExecInfoComputed(_Repr):
    """init_to_execute: nodes marked needed, and captures as (node, input_idx, output_idx)."""

    step: int
    thread: int
    graph_task: int
    needed: tuple[int, ...]
    captured: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class TaskPushed(_Repr):
    """A task entered a ready queue. `node` is None for the dummy task that wakes an owner thread."""

    step: int
    thread: int
    graph_task: int
    node: int | None
    node_name: str
    queue: str
    priority: tuple[int, int]  # (reentrant depth, seq_nr); the larger pops first
    queue_length: int  # after the push


@dataclass(frozen=True, slots=True)
class TaskPopped(_Repr):
    """A task left a ready queue; `stale` when its graph task was already gone (it is discarded)."""

    step: int
    thread: int
    graph_task: int
    node: int | None
    node_name: str
    queue: str
    priority: tuple[int, int]
    queue_length: int  # after the pop
    pushed_at: int  # step of the matching TaskPushed
    stale: bool


@dataclass(frozen=True, slots=True)
class BufferWritten(_Repr):
    """A grad reached input slot `slot` of `node`: the first write, or a gradient accumulation."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    slot: int
    is_accumulation: bool


@dataclass(frozen=True, slots=True)
class HookRan(_Repr):
    """A hook returned: kind is tensor_pre, retains_grad, pre, post or post_accumulate_grad."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    hook_kind: str
    hook_name: str


@dataclass(frozen=True, slots=True)
class NodeStarted(_Repr):
    """A node's apply is about to run on these grads (after its pre-hooks)."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    inputs: tuple[TensorSummary | None, ...]


@dataclass(frozen=True, slots=True)
class NodeFinished(_Repr):
    """A node's apply returned these grads (after validation and post-hooks)."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    outputs: tuple[TensorSummary | None, ...]


@dataclass(frozen=True, slots=True)
class GradCaptured(_Repr):
    """autograd.grad captured the grad flowing into `node` as its result number `output_index`."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    output_index: int
    grad: TensorSummary | None


@dataclass(frozen=True, slots=True)
class GradAccumulated(_Repr):
    """AccumulateGrad `node` wrote its leaf's `.grad`."""

    step: int
    thread: int
    graph_task: int
    node: int
    node_name: str
    grad: TensorSummary | None


@dataclass(frozen=True, slots=True)
class ErrorRaised(_Repr):
    """The first error of a graph task, raised in `node` (None when raised after the last node)."""

    step: int
    thread: int
    graph_task: int
    node: int | None
    node_name: str
    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class GraphTaskFinished(_Repr):
    """A graph task completed, with or without an error."""

    step: int
    thread: int
    graph_task: int
    has_error: bool


Event = Union[SeqNrBumped, NodeCreated, GraphTaskStarted, DependenciesComputed, ExecInfoComputed, TaskPushed,
              TaskPopped, BufferWritten, HookRan, NodeStarted, NodeFinished, GradCaptured, GradAccumulated,
              ErrorRaised, GraphTaskFinished]

EVENT_TYPES: dict[Kind, type] = dict(zip(Kind, (
    SeqNrBumped, NodeCreated, GraphTaskStarted, DependenciesComputed, ExecInfoComputed, TaskPushed, TaskPopped,
    BufferWritten, HookRan, NodeStarted, NodeFinished, GradCaptured, GradAccumulated, ErrorRaised,
    GraphTaskFinished), strict=True))
"""The record type of each kind."""
KIND_OF: dict[type, Kind] = {cls: kind for kind, cls in EVENT_TYPES.items()}
"""The kind of each record type: `KIND_OF[type(event)]`."""
