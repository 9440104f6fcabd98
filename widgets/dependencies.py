"""DependenciesView: every node still counted, its remaining count and its input buffer's slots."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace

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
        self.state: EngineState | None = None
        self.old: EngineState | None = None  # the step shown before: its counts say which rows changed
        self.offsets = np.zeros(1, dtype=np.int64)  # the first row of each graph task's nodes, and the row count
        self.same_rows = True  # the counted nodes are the last step's, in the same rows
        self.waiting: dict[int, tuple[bool, ...]] = {}
        self._rows: dict[int, tuple[int, int, int, bool]] = {}  # row -> (task's place, node, count, changed)
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(26, with_seq=True)

    def header(self) -> str:
        """The column headers."""
        return f"{'node':<{self.name_width}} {'to go':>5}  buffer"

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Take a new step's counts; rows read them when shown, and compare them with the last step's.

        The rows are each running graph task's counted nodes in turn, by node. Only the rows on screen are read
        (NOTE [counts at a step] in tracer/store/indexes.py): a 1M-node backward counts a million nodes.
        """
        old = self.state
        sizes = [gt.num_counted() for gt in state.graph_tasks]
        old_ids = [gt.graph_task for gt in old.graph_tasks] if old is not None else []
        # A task's counted nodes only shrink as it runs: the same tasks counting as many nodes count the same ones.
        self.same_rows = (old_ids == [gt.graph_task for gt in state.graph_tasks]
                          and np.array_equal(np.diff(self.offsets), sizes)) if old is not None else not sum(sizes)
        self.old, self.state = old, state
        self.offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self._rows = {}
        self.waiting = {}
        for gt in state.graph_tasks:
            if len(gt.waiting_nodes()) <= 2048:
                self.waiting.update(gt.not_ready)
        self.rows_changed()

    _BLOCK = 64
    """Rows read at once: a screenful, in one vectorised read of the counts."""

    def _row(self, index: int) -> tuple[int, int, int, bool]:
        """(the place of its graph task in the state, node, count, whether the count changed) of row `index`."""
        found = self._rows.get(index)
        if found is None:
            self._read_rows(index)
            found = self._rows[index]
        return found

    def _read_rows(self, index: int) -> None:
        """Read rows from `index` on (up to _BLOCK, within one graph task), with their changes."""
        assert self.state is not None
        k = int(np.searchsorted(self.offsets, index, side="right")) - 1
        first, end = int(self.offsets[k]), min(index + self._BLOCK, int(self.offsets[k + 1]))
        nodes, counts = self.state.graph_tasks[k].counted_rows(index - first, end - first)
        changed = self._changed(k, nodes, counts)
        for i, (node, count, moved) in enumerate(zip(nodes.tolist(), counts.tolist(), changed.tolist(), strict=True)):
            self._rows[index + i] = (k, node, count, moved)

    def _changed(self, k: int, nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Whether each count (of graph task k's rows) differs from its node's count at the last step shown: the
        same row's when the rows are the last step's, else the node's first row then, if it had one."""
        if self.old is None:
            return np.zeros(len(nodes), dtype=bool)
        if self.same_rows:
            return self.old.graph_tasks[k].counts_of(nodes) != counts
        changed = np.zeros(len(nodes), dtype=bool)
        open_ = np.ones(len(nodes), dtype=bool)  # no row of the node found yet
        for gt in self.old.graph_tasks:
            before = gt.counts_of(nodes)
            found = open_ & (before > 0)
            changed[found] = before[found] != counts[found]
            open_ &= ~found
        return changed

    def is_changed(self, index: int) -> bool:
        """Whether row `index`'s count differs from its node's count at the last step shown."""
        return self._row(index)[3]

    def row_count(self) -> int:
        return max(int(self.offsets[-1]), 1)

    def row_key(self, index: int) -> object:
        if not self.offsets[-1]:
            return "empty"
        _, node, count, changed = self._row(index)
        return node, count, changed, self.waiting.get(node)

    def node_at_row(self, index: int) -> int | None:
        return self._row(index)[1] if index < int(self.offsets[-1]) else None

    def row_text(self, index: int) -> Text:
        if not self.offsets[-1]:
            return Text("no node is counted at this step", style="italic")
        _, node, count, _ = self._row(index)
        slots = self.waiting.get(node)
        filled = "" if slots is None else "  [" + "".join("x" if s else "." for s in slots) + "]"
        text = Text(f"{self.labels.fit(self.labels.label(node), self.name_width)} {count:>5}{filled}")
        if self.is_changed(index):
            text.stylize(self.component_style("dependencies--changed"))
        return text
