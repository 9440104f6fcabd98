"""DependenciesView: every node still counted, its remaining count and its input buffer's slots."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from tracer.replay import EngineState
from tracer.trace import Trace

from .labels import NodeLabels
from .lazy_list import LazyList


class DependenciesView(LazyList):
    """Rows of (node, remaining count, filled slots); counts that changed at this step are highlighted."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {"dependencies--changed"}
    DEFAULT_CSS = """
    DependenciesView > .dependencies--changed { color: $warning; text-style: bold; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.nodes = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.changed: np.ndarray | None = np.zeros(0, dtype=bool)  # per row: count differs from the last step's
        self.old_nodes = self.old_counts = np.zeros(0, dtype=np.int64)
        self.waiting: dict[int, tuple[bool, ...]] = {}
        self.state: EngineState | None = None
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(26, with_seq=True)

    def header(self) -> str:
        """The column headers."""
        return f"{'node':<{self.name_width}} {'to go':>5}  buffer"

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Take a new step's counts, comparing them with the last step's to highlight changes."""
        old_nodes, old_counts = self.nodes, self.counts
        parts = [gt.dependency_arrays() for gt in state.graph_tasks]
        if len(parts) == 1:  # the usual case: no copy of the (read-only) arrays
            self.nodes, self.counts = parts[0]
        else:
            self.nodes = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
            self.counts = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        self.old_nodes, self.old_counts = old_nodes, old_counts
        same_rows = len(old_nodes) == len(self.nodes) and np.array_equal(old_nodes, self.nodes)
        self.changed = (self.counts != old_counts) if same_rows else None  # else found row by row: is_changed
        self.waiting = {}
        for gt in state.graph_tasks:
            if len(gt.waiting_nodes()) <= 2048:
                self.waiting.update(gt.not_ready)
        self.state = state
        self.rows_changed()

    def is_changed(self, index: int) -> bool:
        """Whether row `index`'s count differs from its node's count at the last step shown.

        When the counted nodes are the ones of the last step, one vectorised comparison answered for every
        row in `show`; otherwise (a node just left the counts) only rows on screen ask, one lookup each.
        """
        if self.changed is not None:
            return bool(self.changed[index])
        where = np.flatnonzero(self.old_nodes == self.nodes[index])
        return bool(len(where)) and int(self.old_counts[where[0]]) != int(self.counts[index])

    def row_count(self) -> int:
        return max(len(self.nodes), 1)

    def row_key(self, index: int) -> object:
        if not len(self.nodes):
            return "empty"
        node = int(self.nodes[index])
        return node, int(self.counts[index]), self.is_changed(index), self.waiting.get(node)

    def node_at_row(self, index: int) -> int | None:
        return int(self.nodes[index]) if index < len(self.nodes) else None

    def row_text(self, index: int) -> Text:
        if not len(self.nodes):
            return Text("no node is counted at this step", style="italic")
        node, count = int(self.nodes[index]), int(self.counts[index])
        slots = self.waiting.get(node)
        filled = "" if slots is None else "  [" + "".join("x" if s else "." for s in slots) + "]"
        text = Text(f"{self.labels.fit(self.labels.label(node), self.name_width)} {count:>5}{filled}")
        if self.is_changed(index):
            text.stylize(self.component_style("dependencies--changed"))
        return text
