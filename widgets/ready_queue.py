"""ReadyQueueView: each ready queue's tasks in pop order, with priorities and why the head is first."""
from __future__ import annotations

from rich.text import Text

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.replay.rows import ready_queue_rows
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels, fit
from agdb.tracer.views.panel_text import queue_note, queue_title, task_cells

from .lazy_list import LazyList


class ReadyQueueView(LazyList):
    """A header per queue, then its tasks in the order they will be popped (tracer.replay.rows.ready_queue_rows)."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {"ready-queue--head", "ready-queue--title"}
    DEFAULT_CSS = """
    ReadyQueueView > .ready-queue--title { text-style: bold; }
    ReadyQueueView > .ready-queue--head { color: $success; text-style: bold; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(22)
        self._name_wanted = self.name_width  # the width the trace's longest name wants
        self.rows: list[Text] = [Text("no queue yet")]
        self.row_nodes: list[int | None] = [None]
        self._shown: object = None

    def header(self) -> str:
        """The column headers: a task's place in the pop order, and its priority (depth, then seq_nr)."""
        return f"  {'pop':>3}  {'node':<{self.name_width}} {'depth':>5} {'seq_nr':>6}"

    def fit_columns(self, width: int) -> bool:
        """Narrow the node column (down to 14, cut with `…`) so that depth and seq_nr stay in view."""
        name = max(14, min(self._name_wanted, width - len(self.header()) + self.name_width))
        changed = name != self.name_width
        if changed:
            self.name_width = name
            self._relayout()
        return changed

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Lay out the queues of a step."""
        if state.ready_queues == self._shown:
            return  # the queues did not change at this step: no repaint
        self._shown = state.ready_queues
        self._state = state
        self._relayout()

    def _relayout(self) -> None:
        """Make the rows of the state shown, at the node column's width."""
        state = self.__dict__.get("_state")
        if state is None:
            return
        rows: list[Text] = []
        nodes: list[int | None] = []
        title = self.component_style("ready-queue--title")
        head = self.component_style("ready-queue--head")
        for q in ready_queue_rows(state):
            rows.append(Text(queue_title(self.trace, q), style=title))
            nodes.append(None)
            for i, t in enumerate(q.tasks):
                pop, name, depth, seq = task_cells(self.labels, i, t)
                line = Text(f"  {pop:>3}  {fit(name, self.name_width)} {depth:>5} {seq:>6}")
                if i == 0:
                    line.stylize(head)
                rows.append(line)
                nodes.append(t.node)
            if q.tasks:
                rows.append(Text(f"  {queue_note(q)}", style="italic"))
                nodes.append(None)
        self.rows = rows or [Text("all ready queues are empty")]
        self.row_nodes = nodes or [None]
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.rows)

    def node_at_row(self, index: int) -> int | None:
        return self.row_nodes[index]

    def row_text(self, index: int) -> Text:
        return self.rows[index].copy()
