"""NodeInspector: everything known about the selected node at the step, one line per fact."""
from __future__ import annotations

from rich.text import Text

from agdb.tracer.replay.node_details import node_details
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.panel_text import detail_lines

from .lazy_list import LazyList
from .styled import styled


class NodeInspector(LazyList):
    """The selected node's edges, users, hooks, grads in and out, errors and forward traceback
    (tracer.views.panel_text.detail_lines, which `agdb show --node` prints too)."""

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.node: int | None = None
        self.lines: list[Text] = [Text("press Enter on a node in any panel to inspect it", style="italic")]
        self.labels = NodeLabels(trace)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Show the selected node as it is after the state's step."""
        self.node = selected
        if selected is not None:
            details = node_details(self.trace, selected, state.step)
            self.lines = [styled(line) for line in detail_lines(self.labels, details)]
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.lines)

    def row_text(self, index: int) -> Text:
        return self.lines[index].copy()
