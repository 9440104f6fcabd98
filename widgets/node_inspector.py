"""NodeInspector: everything known about the selected node at the step, one line per fact."""
from __future__ import annotations

from rich.text import Text
from textual.message import Message

from agdb.tracer.replay.node_details import node_details
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.compiled import COMPILED_LINE, compile_of_node, has_joint
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.panel_text import detail_lines

from .lazy_list import LazyList
from .styled import styled


class NodeInspector(LazyList):
    """The selected node's edges, users, hooks, grads in and out, errors and forward traceback
    (tracer.views.panel_text.detail_lines, which `agdb show --node` prints too). Enter on a compiled region's
    "compiled graph cN" line asks for that compile's joint graph (JointRequested)."""

    class JointRequested(Message):
        """The user chose the line naming compile `index` of a CompiledFunctionBackward node: open its joint graph."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.node: int | None = None
        self.lines: list[Text] = [Text("press Enter on a node in any panel to inspect it", style="italic")]
        self.labels = NodeLabels(trace)
        self.compile_row: int | None = None  # the row of the "compiled graph cN" line, and N
        self.compile_index = 0

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Show the selected node as it is after the state's step."""
        self.node = selected
        if selected is not None:
            details = node_details(self.trace, selected, state.step)
            found = detail_lines(self.labels, details)
            self.lines = [styled(line) for line in found]
            self.compile_row = None
            c = compile_of_node(self.trace, selected)
            if c is not None and has_joint(c):
                self.compile_row = next(i for i, line in enumerate(found) if line.text.startswith(COMPILED_LINE))
                self.compile_index = c["index"]
        self.rows_changed()

    def action_select(self) -> None:
        if self.compile_row is not None and self.cursor == self.compile_row:
            self.post_message(self.JointRequested(self.compile_index))
            return
        super().action_select()

    def row_count(self) -> int:
        return len(self.lines)

    def row_text(self, index: int) -> Text:
        return self.lines[index].copy()
