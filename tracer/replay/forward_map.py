"""The forward-to-backward map: which forward op made each backward node, and which seq_nrs look odd.

Imports numpy and the tracer only. A backward node is made by one forward op (a multi-output op makes one
node for all its outputs, engine-semantics §1.5), so the map is one row per node, in the order the nodes were made.
Flags mark what a reader of seq_nrs trips over; see NOTE [seq_nr anomalies].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agdb.tracer.store.arrays import first_positions
from agdb.tracer.store.schema import Kind, short_name
from agdb.tracer.store.trace import Trace

# NOTE [seq_nr anomalies]
# - accumulate: an AccumulateGrad. It takes no seq_nr (it holds 2**64-1 so that it runs as early as it
#   can) and marks where a leaf's gradient accumulates.
# - engine: a node the engine (not a forward op) made that still took a number from the counter: GraphRoot
#   of a multi-root backward, Identity for an unused `inputs=` leaf, DelayedError (engine-semantics §1.4). These are
#   the usual answer to "which line bumped seq_nr?" when no op is to blame.
# - in_backward: made while its thread ran a backward (create_graph formulas, ops in a hook or a custom
#   Function's backward). Its seq_nr comes from the thread running the node (engine-semantics §1.7), not from the
#   forward pass.
# - no_graph: took a seq_nr but never joined a graph (a custom Function applied under no_grad or to inputs
#   that need no grad: engine-semantics §1.4, PyNode).
# - other_thread: another thread made a node with the same seq_nr; seq_nrs of different threads cannot be
#   compared (engine-semantics §1.2).
FLAGS = ("accumulate", "engine", "in_backward", "no_graph", "other_thread")
"""Flag names; flag i is bit i of ForwardMap.flags."""
ENGINE_MADE = ("GraphRoot", "Identity", "DelayedError", "UndefinedGrad", "UndefinedGradBackward")
"""Nodes the engine makes that take a seq_nr from the counter (engine-semantics §1.4)."""


@dataclass(frozen=True, slots=True)
class ForwardOp:
    """One forward op and the backward node it made."""

    node: int
    op: str  # `mul` for MulBackward0, `leaf` for an AccumulateGrad
    seq_nr: int
    thread: int
    step: int  # when the node was made
    lineno: int
    source: str
    flags: tuple[str, ...]


class ForwardMap:
    """Forward ops in the order their nodes were made; columns, with records made on demand."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        created = trace.created_steps()
        self.order = np.argsort(created, kind="stable")
        """Node indices, in the order they were made: row i of the panel shows node order[i]."""
        self.row = np.empty_like(self.order)
        self.row[self.order] = np.arange(len(self.order))
        self.flags = _flags(trace, created)
        """Bit i set when flag FLAGS[i] applies to the node."""

    def __len__(self) -> int:
        return len(self.order)

    def op(self, row: int) -> ForwardOp:
        """The forward op on `row`."""
        node = int(self.order[row])
        info = self.trace.node(node)
        thread = info.thread if info.thread >= 0 else 0
        return ForwardOp(node, info.forward_op, info.seq_nr, thread, info.created_at, info.lineno, info.source,
                         self.flags_of(node))

    def flags_of(self, node: int) -> tuple[str, ...]:
        """The flag names that apply to `node`."""
        bits = int(self.flags[node])
        return tuple(name for i, name in enumerate(FLAGS) if bits >> i & 1)

    def backward_nodes(self, row: int) -> tuple[int, ...]:
        """The backward nodes the op on `row` made (one: a multi-output op makes a single node)."""
        return (int(self.order[row]),)

    def row_of(self, node: int) -> int:
        """The row of the op that made `node`."""
        return int(self.row[node])


def _flags(trace: Trace, created: np.ndarray) -> np.ndarray:
    c = trace.columns
    n = trace.num_nodes
    flags = np.zeros(n, dtype=np.uint8)
    if not n:
        return flags
    is_accumulate = trace.nodes_named(lambda s: s.endswith("AccumulateGrad"))
    is_engine = trace.nodes_named(lambda s: short_name(s) in ENGINE_MADE)
    flags |= is_accumulate.astype(np.uint8) << 0
    flags |= is_engine.astype(np.uint8) << 1
    ev_node, ev_thread = c["ev_node"], c["ev_thread"]
    made_steps = trace.steps_of(Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED)
    # The first bump or creation of each node: its step and its thread. A node may have neither (described only
    # by `TraceBuilder.node`, or made before a Recorder was attached): position -1 reads the appended -1 and 0.
    at = first_positions(ev_node[made_steps], n)
    known = at >= 0
    first = np.append(made_steps, -1)[at]
    first_thread = np.append(ev_thread[made_steps], 0)[at].astype(np.int64)
    flags |= (known & _inside_backward(trace, np.where(known, first, created), first_thread)).astype(np.uint8) << 2
    bumped = np.zeros(n, bool)
    bumped[ev_node[trace.steps_of(Kind.SEQ_NR_BUMPED)]] = True
    in_graph = np.zeros(n, bool)
    in_graph[ev_node[trace.steps_of(Kind.NODE_CREATED)]] = True
    # A node is in a graph when it was created with edges or when another node points at it.
    children = c["edge_child"]
    in_graph[children[children >= 0]] = True
    flags |= (bumped & ~in_graph).astype(np.uint8) << 3
    flags |= _shared_across_threads(trace, first_thread, known & ~is_accumulate).astype(np.uint8) << 4
    return flags


def _inside_backward(trace: Trace, steps: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Whether each (step, thread) lies inside a graph task started on that thread, or inside a node run."""
    inside = np.zeros(len(steps), bool)
    starts_t = trace.steps_of(Kind.GRAPH_TASK_STARTED)
    firsts = [int(found[0]) for found in (starts_t, trace.steps_of(Kind.NODE_STARTED)) if len(found)]
    # Only a step after the first graph task or run can lie inside one: in a single backward's trace no node
    # is made after it starts, and the runs (0.1-0.3 s to find in a 1M-node trace) are not needed at all.
    ask = np.flatnonzero(steps >= min(firsts)) if firsts else np.zeros(0, np.int64)
    if not len(ask):
        return inside
    inside[ask] = _inside_intervals(trace, starts_t, steps[ask], threads[ask])
    return inside


def _inside_intervals(trace: Trace, starts_t: np.ndarray, steps: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """_inside_backward for steps that may be inside: against every graph task's and every run's interval."""
    c = trace.columns
    ends_t = trace.steps_of(Kind.GRAPH_TASK_FINISHED)
    task_end = dict(zip(c["ev_task"][ends_t].tolist(), ends_t.tolist(), strict=True))
    t_start = starts_t
    t_end = np.array([task_end.get(int(t), len(trace)) for t in c["ev_task"][starts_t]], dtype=np.int64)
    t_thread = c["ev_thread"][starts_t].astype(np.int64)
    r_start, r_end, r_thread, _ = trace.index.runs
    all_start = np.concatenate([t_start, r_start])
    all_end = np.concatenate([t_end, r_end])
    all_thread = np.concatenate([t_thread, r_thread])
    inside = np.zeros(len(steps), bool)
    for thread in np.unique(all_thread).tolist():
        mine = all_thread == thread
        by_start = np.argsort(all_start[mine], kind="stable")
        s = all_start[mine][by_start]
        reach = np.maximum.accumulate(all_end[mine][by_start])  # the furthest end among intervals so far
        ask = threads == thread
        k = np.searchsorted(s, steps[ask], side="right") - 1
        inside[ask] = (k >= 0) & (reach[np.maximum(k, 0)] > steps[ask])
    return inside


def _shared_across_threads(trace: Trace, threads: np.ndarray, considered: np.ndarray) -> np.ndarray:
    """Nodes whose seq_nr another thread also gave to a node."""
    c = trace.columns
    seqs = c["node_seq"].astype(np.int64)
    idx = np.flatnonzero(considered)
    shared = np.zeros(len(seqs), bool)
    if len(idx) < 2:
        return shared
    mine = threads[idx]
    if mine.min() == mine.max():  # one thread made every node (the usual case): nothing to compare
        return shared
    _, thread_rank = np.unique(mine, return_inverse=True)
    width = int(thread_rank.max()) + 1
    pairs = np.unique(seqs[idx] * width + thread_rank)  # distinct (seq_nr, thread), as one sortable key
    seq_values, counts = np.unique(pairs // width, return_counts=True)
    shared[idx] = np.isin(seqs[idx], seq_values[counts > 1])
    return shared
