"""DependenciesView: every node still counted, its remaining count and its input buffer's slots."""
from __future__ import annotations

from rich.text import Text

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.replay.rows import DependencyRow, DependencyRows
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels, fit
from agdb.tracer.views.panel_text import slots_text

from .lazy_list import LazyList


class DependenciesView(LazyList):
    """Rows of (node, remaining count, filled slots) (tracer.replay.rows.DependencyRows); the counts that changed
    at this step (since the step before) are highlighted."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {"dependencies--changed"}
    DEFAULT_CSS = """
    DependenciesView > .dependencies--changed { color: $warning; text-style: bold; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.model: DependencyRows | None = None
        self._rows: dict[int, DependencyRow] = {}  # the rows read so far at this step, by index
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(26, with_seq=True)

    def header(self) -> str:
        """The column headers."""
        return f"{'node':<{self.name_width}} {'to go':>5}  buffer"

    def show_state(self, state: EngineState, selected: int | None = None,
                   before: EngineState | None = None) -> None:
        """Take a new step's rows: `before` is the state at the step before (None at step 0, or when no graph task
        runs), whose counts say which rows changed. Rows are read when shown."""
        self.model = DependencyRows(state, before)
        self._rows = {}
        self.rows_changed()

    _BLOCK = 64
    """Rows read at once: a screenful, in one vectorised read of the counts."""

    def _row(self, index: int) -> DependencyRow:
        found = self._rows.get(index)
        if found is None:
            assert self.model is not None
            for i, row in enumerate(self.model.rows(index, index + self._BLOCK)):
                self._rows[index + i] = row
            found = self._rows[index]
        return found

    def is_changed(self, index: int) -> bool:
        """Whether row `index`'s count differs from its node's count the step before."""
        return self._row(index).is_changed

    def _count(self) -> int:
        return len(self.model) if self.model is not None else 0

    def row_count(self) -> int:
        return max(self._count(), 1)

    def row_key(self, index: int) -> object:
        if not self._count():
            return "empty"
        row = self._row(index)
        return row.node, row.count, row.is_changed, row.filled

    def node_at_row(self, index: int) -> int | None:
        return self._row(index).node if index < self._count() else None

    def row_text(self, index: int) -> Text:
        if not self._count():
            return Text("no node is counted at this step", style="italic")
        row = self._row(index)
        filled = slots_text(row.filled)
        text = Text(f"{fit(self.labels.label(row.node), self.name_width)} {row.count:>5}" +
                    (f"  {filled}" if filled else ""))
        if row.is_changed:
            text.stylize(self.component_style("dependencies--changed"))
        return text
