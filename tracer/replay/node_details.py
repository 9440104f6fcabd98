"""Everything a trace knows about one node up to a step: edges, users, hooks, grads in and out, errors.

Imports numpy and the tracer only; the TUI's node inspector renders what `node_details` returns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agdb.tracer.store import events as ev
from agdb.tracer.store.trace import NodeInfo, Trace

MAX_EVENTS = 200
"""The inspector lists at most this many of a node's events (the latest ones)."""


@dataclass(frozen=True, slots=True)
class NodeDetails:
    """A node's static facts plus what happened to it by `step`."""

    info: NodeInfo
    step: int
    users: tuple[tuple[int, int], ...]  # (node, slot): nodes whose next edge `slot` points here
    events: tuple[ev.Event, ...]  # its events up to `step`, oldest first (at most MAX_EVENTS)
    events_left_out: int  # older events not in `events`

    @property
    def hooks(self) -> tuple[ev.HookRan, ...]:
        """The hooks that ran on it."""
        return tuple(e for e in self.events if isinstance(e, ev.HookRan))

    @property
    def errors(self) -> tuple[ev.ErrorRaised, ...]:
        """The errors it raised."""
        return tuple(e for e in self.events if isinstance(e, ev.ErrorRaised))

    @property
    def last_run(self) -> tuple[ev.NodeStarted | None, ev.NodeFinished | None]:
        """Its latest NodeStarted (grads in) and, once it returned, the NodeFinished after it (grads out)."""
        started = finished = None
        for e in self.events:
            if isinstance(e, ev.NodeStarted):
                started, finished = e, None
            elif isinstance(e, ev.NodeFinished):
                finished = e
        return started, finished


def node_details(trace: Trace, node: int, step: int) -> NodeDetails:
    """What is known of `node` after event `step`."""
    c = trace.columns
    edge_start = c["node_edge_start"]
    edge_idx = np.flatnonzero(c["edge_child"] == node)
    parents = np.searchsorted(edge_start, edge_idx, side="right") - 1
    users = tuple((int(p), int(e - edge_start[p])) for p, e in zip(parents, edge_idx, strict=True))
    steps = np.flatnonzero(c["ev_node"][:step + 1] == node)
    left_out = max(0, len(steps) - MAX_EVENTS)
    events = tuple(trace[int(s)] for s in steps[left_out:])
    return NodeDetails(trace.node(node), step, users, events, left_out)
