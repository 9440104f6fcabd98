"""PruningView: min_topo_nr, the nodes it pruned and why, and exec_info's needed and captured nodes."""
from __future__ import annotations

from rich.text import Text

from tracer.replay import EngineState
from tracer.trace import Trace

from .labels import NodeLabels
from .lazy_list import LazyList


class PruningView(LazyList):
    """Per running graph task: what topological_nr pruning and exec_info removed from the run."""

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.rows: list[Text] = [Text("no graph task is running")]
        self.row_nodes: list[int | None] = [None]
        self.labels = NodeLabels(trace)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Lay out the pruning of the running graph tasks."""
        shown = tuple((gt.graph_task, gt.reentrant_depth, gt.min_topo_nr, gt.pruned, gt.needed, gt.captured)
                      for gt in state.graph_tasks)
        if shown == getattr(self, "_shown", None):
            return  # what this panel shows did not change at this step: no repaint
        self._shown = shown
        rows: list[tuple[Text, int | None]] = []
        name = self.labels.label
        for gt in state.graph_tasks:
            rows.append((Text(f"graph task {gt.graph_task} (depth {gt.reentrant_depth}): min_topo_nr "
                              f"{gt.min_topo_nr}", style="bold"), None))
            for node in gt.pruned:
                topo = self.trace.node(node).topological_nr
                rows.append((Text(f"  pruned  {name(node):<28} topo {topo} < min {gt.min_topo_nr}"), node))
            if gt.needed or gt.captured:
                rows.append((Text(f"  exec_info: {len(gt.needed)} needed, {len(gt.captured)} captured"), None))
                rows.extend((Text(f"  needed  {name(n)}"), n) for n in gt.needed)
                rows.extend((Text(f"  capture {name(n)}"), n) for n in gt.captured)
            else:
                rows.append((Text("  exec_info empty: every reachable node runs", style="italic"), None))
        rows = rows or [(Text("no graph task is running"), None)]
        self.rows = [text for text, _ in rows]
        self.row_nodes = [node for _, node in rows]
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.rows)

    def node_at_row(self, index: int) -> int | None:
        return self.row_nodes[index]

    def row_text(self, index: int) -> Text:
        return self.rows[index].copy()
