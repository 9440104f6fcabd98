"""Which nodes a picture of the graph shows: all, a neighbourhood, or linear chains folded into one.

Imports numpy and the tracer only. Everything walks the trace's edge columns iteratively (a frontier at a
time, or one pass over the nodes), so no graph depth reaches Python's recursion limit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import Trace


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


@dataclass(frozen=True)
class Folding:
    """Shown nodes grouped: group g holds `members[starts[g]:starts[g+1]]`, in chain order."""

    group_of: np.ndarray  # per node: its group, or -1 when not shown
    members: np.ndarray
    starts: np.ndarray

    @property
    def num_groups(self) -> int:
        """How many boxes the picture draws."""
        return len(self.starts) - 1

    def group(self, g: int) -> np.ndarray:
        """The nodes of group `g`."""
        return self.members[self.starts[g]:self.starts[g + 1]]


def no_folding(nodes: np.ndarray, num_nodes: int) -> Folding:
    """Every shown node (`nodes`: distinct, ascending) in a group of its own."""
    members = np.asarray(nodes, dtype=np.int64)
    if len(members) == num_nodes:  # every node: node v is group v, as `members` already says
        return Folding(members, members, np.arange(len(nodes) + 1, dtype=np.int64))
    group_of = np.full(num_nodes, -1, dtype=np.int64)
    group_of[nodes] = np.arange(len(nodes))
    return Folding(group_of, members, np.arange(len(nodes) + 1, dtype=np.int64))


MIN_CHAIN = 3
"""Chains shorter than this stay unfolded: folding two nodes into a summary hides more than it saves."""


def fold_chains(trace: Trace, nodes: np.ndarray) -> Folding:
    """Fold linear chains among `nodes` (each link: one user and one child, both shown) into one group.

    A chain's nodes are consecutive along next edges; its first node may have several users and its
    last several children, so where the chain joins the rest of the graph stays visible.
    """
    n = trace.num_nodes
    shown = np.zeros(n, dtype=bool)
    shown[nodes] = True
    parent, child, _, _ = edges(trace)
    inner = shown[parent] & shown[child]
    parent, child = parent[inner], child[inner]
    users = np.bincount(child, minlength=n)
    children = np.bincount(parent, minlength=n)
    # A link parent -> child joins the child to the parent's chain when it is the parent's only child and
    # the child's only user.
    linked = (children[parent] == 1) & (users[child] == 1)
    next_in_chain = np.full(n, -1, dtype=np.int64)
    next_in_chain[parent[linked]] = child[linked]
    has_prev = np.zeros(n, dtype=bool)
    has_prev[child[linked]] = True
    group_of = np.full(n, -1, dtype=np.int64)
    follow = next_in_chain.tolist()
    flat: list[int] = []
    sizes: list[int] = []
    for head in np.asarray(nodes)[~has_prev[nodes]].tolist():  # one pass over the nodes: no recursion
        chain = [head]
        nxt = follow[head]
        while nxt >= 0:
            chain.append(nxt)
            nxt = follow[nxt]
        flat.extend(chain)
        if len(chain) >= MIN_CHAIN:
            sizes.append(len(chain))
        else:
            sizes.extend([1] * len(chain))
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    starts[1:] = np.cumsum(sizes)
    members = np.asarray(flat, dtype=np.int64)
    group_of[members] = np.repeat(np.arange(len(sizes)), sizes)
    return Folding(group_of, members, starts)
