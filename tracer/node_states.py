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


def node_states(trace: Trace, state: EngineState) -> tuple[np.ndarray, np.ndarray]:
    """(state code per node, execution index or -1 per node) at this step; vectorised over the nodes."""
    n = trace.num_nodes
    codes = np.zeros(n, dtype=np.int8)
    executed = state.executed.array()
    order = np.full(n, -1, dtype=np.int64)
    if len(executed):
        order[executed] = np.arange(len(executed))
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
