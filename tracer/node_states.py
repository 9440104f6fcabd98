"""Each node's state at a step (not reached, waiting, ready, running, done, pruned...), for every view.

Imports numpy and the tracer only. The TUI's graph panel and the Graphviz export both style nodes by it.
"""
from __future__ import annotations

import numpy as np

from .replay import EngineState
from .trace import Trace

STATES = ("unreached", "counted", "waiting", "ready", "running", "done", "pruned", "skipped", "captured")
"""A node's state at a step; a state's code is its index here.

unreached: no running graph task counts it; counted: a graph task counts its dependencies; waiting: its
input buffer is partly filled (in not_ready); ready: in a ready queue; running: its apply is on a thread's
stack; done: it ran; pruned: compute_dependencies did not expand it (topo < min_topo_nr); skipped: exec_info
does not need it; captured: autograd.grad captures the grad flowing into it.
"""
STATE_CODE = {name: i for i, name in enumerate(STATES)}


_IOTA = np.arange(0, dtype=np.int32)


def _iota(k: int) -> np.ndarray:
    """0, 1, ..., k-1 as a view of one array kept between calls."""
    global _IOTA
    if len(_IOTA) < k:
        _IOTA = np.arange(max(k, 2 * len(_IOTA)), dtype=np.int32)
    return _IOTA[:k]


def node_states(trace: Trace, state: EngineState,
                out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(state code per node, execution index or -1 per node) at this step; vectorised over the nodes.

    `out`, two arrays of num_nodes (int8 codes, int32 or wider indexes) to fill in place: a view that asks
    on every step reuses its arrays instead of touching fresh memory (NOTE [fresh memory] in replay.py).
    """
    n = trace.num_nodes
    if out is None:
        codes, order = np.zeros(n, dtype=np.int8), np.full(n, -1, dtype=np.int32)
    else:
        codes, order = out
        codes.fill(0)
        order.fill(-1)
    executed = state.executed.array()
    if len(executed):
        order[executed] = _iota(len(executed))
        codes[executed] = STATE_CODE["done"]
    for gt in state.graph_tasks:
        # A counted node has not run in this graph task (its count would be 0), even if an earlier backward
        # ran it: it is counted again, and its old execution index no longer says anything.
        nodes, _ = gt.dependency_arrays()
        codes[nodes] = STATE_CODE["counted"]
        order[nodes] = -1
        if gt.needed or gt.captured:
            wanted = np.zeros(n, dtype=bool)
            wanted[list(gt.needed) + list(gt.captured)] = True
            skipped = nodes[~wanted[nodes]]
            codes[skipped] = STATE_CODE["skipped"]
        if gt.captured:
            codes[list(gt.captured)] = STATE_CODE["captured"]
        codes[gt.waiting_nodes()] = STATE_CODE["waiting"]
        if gt.pruned:
            codes[list(gt.pruned)] = STATE_CODE["pruned"]
    for q in state.ready_queues:
        ready = [t.node for t in q.tasks if t.node is not None]
        codes[ready] = STATE_CODE["ready"]
    for _, node in state.running:
        codes[node] = STATE_CODE["running"]
    return codes, order
