"""PruningView: min_topo_nr, the nodes it pruned and why, and exec_info's needed and captured nodes."""
from __future__ import annotations

from rich.text import Text

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.replay.rows import pruning_rows
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.panel_text import NO_TASK, pruning_lines

from .lazy_list import LazyList
from .styled import styled


class PruningView(LazyList):
    """Per running graph task: what topological_nr pruning and exec_info removed from the run
    (tracer.replay.rows.pruning_rows); with none running, the last pruning."""

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.rows: list[Text] = [Text(NO_TASK)]
        self.row_nodes: list[int | None] = [None]
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(28, with_seq=True)
        self._shown: object = None

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Lay out the pruning of the step's graph tasks."""
        sections = pruning_rows(self.trace, state)
        if sections == self._shown:
            return  # what this panel shows did not change at this step: no repaint
        self._shown = sections
        lines = pruning_lines(self.labels, sections, self.name_width)
        self.rows = [styled(line) for line in lines]
        self.row_nodes = [line.node for line in lines]
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.rows)

    def node_at_row(self, index: int) -> int | None:
        return self.row_nodes[index]

    def row_text(self, index: int) -> Text:
        return self.rows[index].copy()
