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
