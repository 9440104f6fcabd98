"""GraphView: every backward node with its execution index, seq_nr, topo, count and state at the step."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.message import Message

from tracer.replay import EngineState
from tracer.trace import Trace

from .lazy_list import LazyList

STATES = ("unreached", "counted", "waiting", "ready", "running", "done", "pruned", "skipped", "captured")
"""A node's state at a step, as the graph panel shows it (each has a component class)."""
_CODE = {name: i for i, name in enumerate(STATES)}
_UINT64_MAX = 2**64 - 1


def node_states(trace: Trace, state: EngineState) -> tuple[np.ndarray, np.ndarray]:
    """(state code per node, execution index or -1 per node) at this step; vectorised over the nodes."""
    n = trace.num_nodes
    codes = np.zeros(n, dtype=np.int8)
    executed = state.executed.array()
    order = np.full(n, -1, dtype=np.int64)
    if len(executed):
        order[executed] = np.arange(len(executed))
        codes[executed] = _CODE["done"]
    for gt in state.graph_tasks:
        nodes, _ = gt.dependency_arrays()
        codes[nodes] = np.where(codes[nodes] == _CODE["done"], codes[nodes], _CODE["counted"])
        if gt.needed or gt.captured:
            wanted = np.zeros(n, dtype=bool)
            wanted[list(gt.needed) + list(gt.captured)] = True
            skipped = nodes[~wanted[nodes]]
            codes[skipped] = _CODE["skipped"]
        if gt.captured:
            codes[list(gt.captured)] = _CODE["captured"]
        codes[gt.waiting_nodes()] = _CODE["waiting"]
        if gt.pruned:
            codes[list(gt.pruned)] = _CODE["pruned"]
    for q in state.ready_queues:
        ready = [t.node for t in q.tasks if t.node is not None]
        codes[ready] = _CODE["ready"]
    for _, node in state.running:
        codes[node] = _CODE["running"]
    return codes, order


class GraphView(LazyList):
    """The trace's nodes, newest first (roots at the top), styled by their state at the step."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {f"graph-view--{s}" for s in STATES}
    DEFAULT_CSS = """
    GraphView > .graph-view--unreached { color: $text-muted; }
    GraphView > .graph-view--counted { color: $text; }
    GraphView > .graph-view--waiting { color: $warning; }
    GraphView > .graph-view--ready { color: $success; text-style: bold; }
    GraphView > .graph-view--running { color: $accent; text-style: bold reverse; }
    GraphView > .graph-view--done { color: $text-muted; text-style: dim; }
    GraphView > .graph-view--pruned { color: $error; text-style: strike; }
    GraphView > .graph-view--skipped { color: $error; text-style: dim; }
    GraphView > .graph-view--captured { color: $secondary; text-style: bold; }
    """

    class NodeSelected(Message):
        """The user chose node `node` (an index into the trace's node table)."""

        def __init__(self, node: int) -> None:
            super().__init__()
            self.node = node

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.codes = np.zeros(trace.num_nodes, dtype=np.int8)
        self.order = np.full(trace.num_nodes, -1, dtype=np.int64)
        self.counts: dict[int, int] = {}

    def show(self, state: EngineState) -> None:
        """Take the state at a new step; keep the running node in view."""
        self.codes, self.order = node_states(self.trace, state)
        self.counts = {}
        for gt in state.graph_tasks:
            nodes, counts = gt.dependency_arrays()
            if len(nodes) <= 4096:
                self.counts.update(zip(nodes.tolist(), counts.tolist(), strict=True))
        self.rows_changed()
        if state.running:
            self.cursor = self.row_of(state.running[-1][1])

    def row_of(self, node: int) -> int:
        """The row that shows `node`."""
        return self.trace.num_nodes - 1 - node

    def node_at(self, row: int) -> int:
        """The node shown on `row`."""
        return self.trace.num_nodes - 1 - row

    def row_count(self) -> int:
        return self.trace.num_nodes

    def row_text(self, index: int) -> Text:
        node = self.node_at(index)
        info = self.trace.node(node)
        state = STATES[int(self.codes[node])]
        order = int(self.order[node])
        seq = "max" if info.seq_nr == _UINT64_MAX else str(info.seq_nr)
        count = self.counts.get(node)
        name = info.name.replace("torch::autograd::", "")
        return Text.assemble(
            (f"{order:>4} " if order >= 0 else "     "),
            (f"{name:<22} ", self.get_component_rich_style(f"graph-view--{state}")),
            f"{state:<9} seq {seq:>4} topo {info.topological_nr:>3}",
            (f" deps {count}" if count is not None else ""),
        )

    def action_select(self) -> None:
        if self.row_count():
            self.post_message(self.NodeSelected(self.node_at(self.cursor)))
