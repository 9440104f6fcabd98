"""The trace schema: every event kind, its code, its name and what each payload column means for it.

This module owns the format's vocabulary; `docs/trace-format.md` explains it in prose. Writers (the
TraceBuilder and, through it, every source) and readers (Trace, replay, views, widgets) import kinds
from here, never from a writer.

An event is one row of the event columns `ev_kind`, `ev_thread`, `ev_task`, `ev_node`, `ev_a`, `ev_b`.
What `ev_node`, `ev_a` and `ev_b` hold depends on the kind (`KindSpec.node`, `.a`, `.b`); some kinds also
own one row of a side table (`KindSpec.side`), where the n-th event of the kind owns the n-th row.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

UINT64_MAX = 2**64 - 1
"""The seq_nr of AccumulateGrad and Error nodes (PyTorch's UINT64_MAX): they take no number of their own."""
INT_MAX = 2**31 - 1
"""The reentrant depth a queued task takes once its graph task is gone (it is discarded when popped)."""
WAKE_UP_PRIORITY = (-1, -1)
"""The priority a wake-up task (no node) is given: it has no depth or seq_nr, and leaves before every node task."""


def seq_code(seq: int) -> int:
    """A seq_nr as stored in an int64 column: 2**64-1 (AccumulateGrad, Error) becomes -1."""
    return -1 if seq >= 2**63 else seq


def seq_decode(code: int) -> int:
    """Inverse of seq_code."""
    return UINT64_MAX if code == -1 else int(code)


def short_name(name: str) -> str:
    """A node's name without PyTorch's namespace: `torch::autograd::AccumulateGrad` -> `AccumulateGrad`."""
    return name.removeprefix("torch::autograd::")


class Kind(IntEnum):
    """Event kinds; the value is the code stored in `ev_kind`. Append only: saved traces use the codes."""

    SEQ_NR_BUMPED = 0
    NODE_CREATED = 1
    GRAPH_TASK_STARTED = 2
    DEPENDENCIES_COMPUTED = 3
    EXEC_INFO_COMPUTED = 4
    TASK_PUSHED = 5
    TASK_POPPED = 6
    BUFFER_WRITTEN = 7
    HOOK_RAN = 8
    NODE_STARTED = 9
    NODE_FINISHED = 10
    GRAD_CAPTURED = 11
    GRAD_ACCUMULATED = 12
    ERROR_RAISED = 13
    GRAPH_TASK_FINISHED = 14


@dataclass(frozen=True, slots=True)
class KindSpec:
    """What one event kind means, column by column."""

    kind: Kind
    summary: str
    node: str  # what ev_node holds ("" when it is unused: -1)
    a: str = ""  # what ev_a holds ("" when unused: 0)
    b: str = ""
    side: str = ""  # the side table a row of which each event of this kind owns


SPECS: dict[Kind, KindSpec] = {s.kind: s for s in (
    KindSpec(Kind.SEQ_NR_BUMPED, "a node took the thread's next sequence number",
             "the node that took it (its node_seq is the number it took)"),
    KindSpec(Kind.NODE_CREATED, "a backward node was made and its next edges attached", "the node"),
    KindSpec(Kind.GRAPH_TASK_STARTED, "backward() or autograd.grad() built a graph task", "its GraphRoot",
             side="task"),
    KindSpec(Kind.DEPENDENCIES_COMPUTED, "the dependency count of every node, and the nodes pruned by "
             "topological_nr", "", b="min_topo_nr", side="deps, pruned"),
    KindSpec(Kind.EXEC_INFO_COMPUTED, "exec_info: the nodes marked needed and the captures", "",
             side="needed, captured"),
    KindSpec(Kind.TASK_PUSHED, "a task entered a ready queue", "the node, or -1 for a wake-up task",
             a="queue (row of the queue table)", b="queue length after the push", side="push_seq"),
    KindSpec(Kind.TASK_POPPED, "a task left a ready queue", "the node, or -1 for a wake-up task",
             a="queue (row of the queue table)", b="queue length after the pop", side="pop_push"),
    KindSpec(Kind.BUFFER_WRITTEN, "a grad reached an input slot of a node", "the node", a="slot",
             b="1 when the grad was added to one already there (accumulation), else 0"),
    KindSpec(Kind.HOOK_RAN, "a hook returned", "the node", a="hook kind (index into HOOK_KINDS)",
             b="hook name (string id)"),
    KindSpec(Kind.NODE_STARTED, "a node's apply is about to run", "the node", side="summaries (inputs)"),
    KindSpec(Kind.NODE_FINISHED, "a node's apply returned", "the node", side="summaries (outputs)"),
    KindSpec(Kind.GRAD_CAPTURED, "autograd.grad captured the grad flowing into a node", "the node",
             a="result index", side="summaries (the grad)"),
    KindSpec(Kind.GRAD_ACCUMULATED, "AccumulateGrad wrote its leaf's .grad", "the AccumulateGrad node",
             side="summaries (the grad)"),
    KindSpec(Kind.ERROR_RAISED, "the first error of a graph task", "the node it was raised in, or -1",
             a="error type (string id)", b="message (string id)"),
    KindSpec(Kind.GRAPH_TASK_FINISHED, "a graph task is over", "", a="1 when it ended with an error"),
)}
"""Every kind's meaning. docs/trace-format.md has the same table in prose."""

SUMMARY_KINDS: tuple[Kind, ...] = (Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.GRAD_CAPTURED,
                                   Kind.GRAD_ACCUMULATED)
"""Kinds whose events own a group of tensor summaries, in step order."""

NODE_KINDS: tuple[Kind, ...] = (Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED, Kind.GRAPH_TASK_STARTED, Kind.BUFFER_WRITTEN,
                                Kind.HOOK_RAN, Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.GRAD_CAPTURED,
                                Kind.GRAD_ACCUMULATED)
"""Kinds whose ev_node must name a node."""

HOOK_KINDS = ("tensor_pre", "retains_grad", "pre", "post", "post_accumulate_grad")
"""The hook kinds, in the order of their codes in HookRan's ev_a."""

WAKE_UP = -2
"""push_seq of a wake-up task (no node): it only wakes the thread that owns the queue."""

Provenance = Literal["observed", "reconstructed", "missing"]
"""How a trace knows a kind of event: seen as it happened, worked out by agdb's model of the engine, or not
at all (the source cannot provide it)."""

EVENT_COLUMNS = ("ev_kind", "ev_thread", "ev_task", "ev_node", "ev_a", "ev_b")
"""The columns with one entry per event."""

DERIVED_COLUMNS = ("node_edge_start", "sgroup_start", "s_shape_start")
"""Columns a Trace computes from stored ones when it is made; never written to a file."""


@dataclass(frozen=True, slots=True)
class Column:
    """One stored column: the table it belongs to, what its values index, and what they mean."""

    name: str
    table: str  # its rows: one per item of this table (see TABLES)
    doc: str
    refers: str = ""  # the table its values index ("string", "node", ...), -1 allowed when `lowest` is -1
    lowest: int | None = None  # the least value allowed
    optional: bool = False  # a writer may leave it out (then readers do without it)
    since: int = 1  # the format version that added it: older files do not have it


TABLES: dict[str, str] = {
    "events": "one row per event, in step order",
    "pushes": "one row per TaskPushed event",
    "pops": "one row per TaskPopped event",
    "node": "one row per node; events and edges name nodes by row",
    "edge": "the next edges of every node, node by node (node_nedges of them each)",
    "frame": "one row per distinct Python line",
    "thread": "one row per thread; events name threads by row",
    "queue": "one row per ready queue",
    "task": "one row per GraphTaskStarted event",
    "task_roots": "the roots of every graph task, task by task (ragged: task_roots_start)",
    "task_inputs": "the inputs= of every graph task, task by task (ragged)",
    "deps": "the (node, count) pairs of every DependenciesComputed event (ragged)",
    "pruned": "the nodes each DependenciesComputed event pruned (ragged)",
    "needed": "the nodes each ExecInfoComputed event marked needed (ragged)",
    "captured": "the captures of each ExecInfoComputed event (ragged)",
    "summary_group": "one row per event of a SUMMARY_KINDS kind: how many tensors it summarises",
    "summary": "one row per tensor summary, group by group",
    "dim": "the shape of every summarised tensor, summary by summary (s_ndim each)",
    "source": "the text of the lines around each frame's line (SOURCE_CONTEXT either side), read when the trace "
              "was recorded, by file and line number",
    "string": "the string table (string_offsets, string_bytes)",
}
"""Every table of a trace file and what its rows are."""

COLUMNS: tuple[Column, ...] = (
    Column("ev_kind", "events", "the event's Kind", lowest=0),
    Column("ev_thread", "events", "the thread that did the work", refers="thread", lowest=0),
    Column("ev_task", "events", "the graph task, numbered 1, 2, ... in order of appearance; 0 outside backward",
           lowest=0),
    Column("ev_node", "events", "the node the event is about (see SPECS), or -1", refers="node", lowest=-1),
    Column("ev_a", "events", "a kind's first payload (see SPECS)"),
    Column("ev_b", "events", "a kind's second payload (see SPECS)"),
    Column("push_seq", "pushes", "the pushed task's seq_nr (seq_code), or WAKE_UP", lowest=WAKE_UP),
    Column("pop_push", "pops", "the step of the push this pop undoes; -1 none; -(step)-2 when stale"),
    Column("node_name", "node", "its name, e.g. MulBackward0", refers="string", lowest=0),
    Column("node_seq", "node", "its seq_nr (seq_code: -1 is 2**64-1)", lowest=-1),
    Column("node_topo", "node", "its topological_nr"),
    Column("node_device", "node", "its device, e.g. cpu, cuda:0", refers="string", lowest=0),
    Column("node_thread", "node", "the thread that made it, or -1", refers="thread", lowest=-1),
    Column("node_frame", "node", "the user's line that made it, or -1", refers="frame", lowest=-1),
    Column("node_inputs", "node", "its input slots (one per output of its forward op)", lowest=0),
    Column("node_nedges", "node", "how many next edges it has", lowest=0),
    Column("node_stack", "node", "its forward traceback under anomaly mode, or -1", refers="string", lowest=-1,
           optional=True),
    Column("node_leaf_name", "node", "for an AccumulateGrad, the name the user knows its leaf by: a module's "
           "parameter path (fc1.weight) or the variable bound to it (w); else -1", refers="string", lowest=-1,
           optional=True, since=5),
    Column("edge_child", "edge", "the node the edge leads to, or -1 for an undefined edge", refers="node",
           lowest=-1),
    Column("edge_input_nr", "edge", "the child's input slot it feeds", lowest=0),
    Column("frame_file", "frame", "the file", refers="string", lowest=0),
    Column("frame_line", "frame", "the line number"),
    Column("frame_func", "frame", "the function", refers="string", lowest=0),
    Column("frame_source", "frame", "the line's stripped text", refers="string", lowest=0),
    Column("frame_col", "frame", "where in the stripped line the expression that ran starts (characters), or -1",
           lowest=-1, since=4),
    Column("frame_end_col", "frame", "where it ends (excluded), or -1; a range of frame_source", lowest=-1,
           since=4),
    Column("frame_module", "frame", "the path of the module call that made the node (model.fc1), or -1",
           refers="string", lowest=-1, optional=True, since=5),
    Column("thread_name", "thread", "the thread's name", refers="string", lowest=0),
    Column("queue_name", "queue", "`cuda:N`, or `cpu:T` for the CPU queue of thread row T", refers="string", lowest=0),
    Column("task_root", "task", "its GraphRoot node", refers="node", lowest=-1),
    Column("task_flags", "task", "bit 0 keep_graph, bit 1 create_graph, bit 2 accumulate_grad", lowest=0),
    Column("task_depth", "task", "its reentrant depth", lowest=0),
    Column("task_roots_node", "task_roots", "a root", refers="node", lowest=-1),
    Column("task_roots_nr", "task_roots", "its input_nr", lowest=0),
    Column("task_inputs_node", "task_inputs", "an input's node", refers="node", lowest=-1),
    Column("task_inputs_nr", "task_inputs", "its input_nr", lowest=0),
    Column("deps_node", "deps", "a counted node", refers="node", lowest=0),
    Column("deps_count", "deps", "its dependency count", lowest=0),
    Column("pruned_node", "pruned", "a node not expanded because its topological_nr < min_topo_nr",
           refers="node", lowest=0),
    Column("needed_node", "needed", "a node exec_info marked needed", refers="node", lowest=0),
    Column("captured_node", "captured", "a node whose incoming grad is captured", refers="node", lowest=-1),
    Column("captured_input", "captured", "the input slot captured", lowest=0),
    Column("captured_output", "captured", "the result index of autograd.grad it becomes", lowest=0),
    Column("s_count", "summary_group", "how many tensors the event summarises", lowest=0),
    Column("s_info", "summary", "bit 0 defined, 1 has NaN, 2 has inf, bits 3-4 preview length", lowest=0),
    Column("s_dtype", "summary", "the dtype's name", refers="string", lowest=0),
    Column("s_device", "summary", "the device", refers="string", lowest=0),
    Column("s_ndim", "summary", "the number of dimensions", lowest=0),
    Column("s_preview", "summary", "the first 3 values (float32, n x 3; NaN-padded)"),
    Column("s_dims", "dim", "the sizes", lowest=0),
    Column("source_file", "source", "the file, as frame_file names it", refers="string", lowest=0, since=3),
    Column("source_line", "source", "the line number", lowest=1, since=3),
    Column("source_text", "source", "the line's text, without its line ending", refers="string", lowest=0,
           since=3),
)
"""Every stored column except the string table's; derived ones (DERIVED_COLUMNS) are never stored."""

RAGGED: dict[str, Kind] = {"task_roots": Kind.GRAPH_TASK_STARTED, "task_inputs": Kind.GRAPH_TASK_STARTED,
                           "deps": Kind.DEPENDENCIES_COMPUTED, "pruned": Kind.DEPENDENCIES_COMPUTED,
                           "needed": Kind.EXEC_INFO_COMPUTED, "captured": Kind.EXEC_INFO_COMPUTED}
"""Ragged tables: `<table>_start` has one offset per event of the kind, plus one."""

SOURCE_CONTEXT = 3
"""Lines of source stored above and below each frame's line (the `source` table), and shown around it."""
