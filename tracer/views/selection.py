"""Which nodes a picture of the graph shows, and its edges: all of them, or a neighbourhood (folding: folding.py).

Imports numpy and the tracer only. Everything walks the trace's edge columns iteratively (a frontier at a
time, or one pass over the nodes), so no graph depth reaches Python's recursion limit.
"""
from __future__ import annotations

import numpy as np

from agdb.tracer.store.trace import Trace


def edges(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(parent, child, slot, input_nr) of every next edge that points at a node (None edges left out).

    Made once per trace and kept in its index (a folded or focused picture asks twice, the TUI at every
    export); the arrays are read-only, as they are shared.
    """
    return trace.index.memo("graph_views.edges", lambda: _edges(trace))


def _edges(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    c = trace.columns
    start = c["node_edge_start"]
    child = np.asarray(c["edge_child"], dtype=np.int64)
    real = np.flatnonzero(child >= 0)  # positions of the kept edges: a slot is one minus its node's start
    parent = np.repeat(np.arange(trace.num_nodes, dtype=np.int64), np.diff(start))[real]
    out = (parent, child[real], real - start[parent], np.asarray(c["edge_input_nr"], dtype=np.int64)[real])
    for a in out:
        a.flags.writeable = False
    return out


def focus_nodes(trace: Trace, center: int, radius: int) -> np.ndarray:
    """Nodes within `radius` edges of `center`, following edges both ways (sorted)."""
    if not 0 <= center < trace.num_nodes:
        raise ValueError(f"node {center} is not in this trace (it has nodes 0..{trace.num_nodes - 1})")
    parent, child, _, _ = edges(trace)
    seen = np.zeros(trace.num_nodes, dtype=bool)
    seen[center] = True
    frontier = np.array([center], dtype=np.int64)
    for _ in range(max(0, radius)):
        mark = np.zeros(trace.num_nodes, dtype=bool)
        mark[frontier] = True
        reached = np.concatenate([child[mark[parent]], parent[mark[child]]])
        frontier = np.unique(reached[~seen[reached]])
        if not len(frontier):
            break
        seen[frontier] = True
    return np.flatnonzero(seen)
