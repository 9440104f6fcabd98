"""GraphView: every backward node with its execution index, seq_nr, topo, count and state at the step."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from agdb.tracer.replay.node_states import STATE_LABEL, STATES, NodeStates
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels, fit, seq_text

from .lazy_list import LazyList


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
    GraphView > .graph-view--not_created { color: $text-disabled; text-style: italic; }
    GraphView > .graph-view--to_push { color: $success; }
    GraphView > .graph-view--raised { color: $error; text-style: bold reverse; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.states = NodeStates(trace)
        self.filled = self.states.filled()  # filled in place at each step (NOTE [stepping the states])
        self.codes, self.order = self.filled.codes, self.filled.order
        self.counts: dict[int, int] = {}
        self.touched: np.ndarray | None = None  # the nodes whose state the last step may have changed; None: any
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(22)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Take the state at a new step; keep the running node in view."""
        self.touched = self.states.fill(state, self.filled)
        self.counts = {}
        for gt in state.graph_tasks:
            if gt.num_counted() <= 4096:
                nodes, counts = gt.dependency_arrays()
                self.counts.update(zip(nodes.tolist(), counts.tolist(), strict=True))
        self.rows_changed()
        if state.running:
            self.cursor = self.row_of(state.running[-1][1])

    def warm(self) -> None:
        """Build the node states' history now (from a worker thread: NOTE [lazy history] in
        tracer/replay/node_states)."""
        self.states.warm()

    def row_of(self, node: int) -> int:
        """The row that shows `node`."""
        return self.trace.num_nodes - 1 - node

    def node_at(self, row: int) -> int:
        """The node shown on `row`."""
        return self.trace.num_nodes - 1 - row

    def row_count(self) -> int:
        return self.trace.num_nodes

    def header(self) -> str:
        """The column headers; `#` is the execution index (the order nodes started running in)."""
        return f"{'#':>3} {'node':<{self.name_width}} {'state':<11} {'seq_nr':>6} {'topo':>4} {'deps':>4}"

    def row_text(self, index: int) -> Text:
        node = self.node_at(index)
        _, seq_nr, topo = self.trace.node_brief(node)
        state = STATES[int(self.codes[node])]
        order = int(self.order[node])
        count = self.counts.get(node)
        return Text.assemble(
            (f"{order:>3} " if order >= 0 else "    "),
            (f"{fit(self.labels.column_name(node), self.name_width)} ",
             self.component_style(f"graph-view--{state}")),
            f"{STATE_LABEL[state]:<11} {seq_text(seq_nr):>6} {topo:>4}",
            (f" {count:>4}" if count is not None else ""),
        )

    def row_key(self, index: int) -> object:
        node = self.node_at(index)
        return node, int(self.codes[node]), int(self.order[node]), self.counts.get(node)

    def node_at_row(self, index: int) -> int | None:
        return self.node_at(index)
