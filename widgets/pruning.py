"""PruningView: min_topo_nr, the nodes it pruned and why, and exec_info's needed and captured nodes."""
from __future__ import annotations

import bisect

from rich.text import Text

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace

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
        self.name_width = self.labels.column_width(28, with_seq=True)
        tasks = trace.index.tasks
        ended = sorted((t.end, tid) for tid, t in tasks.items() if t.pruned)
        self._ended_steps = [end for end, _ in ended]
        self._ended_tasks = [tid for _, tid in ended]
        """Graph tasks that pruned, by the step they finished: what the panel recalls once none runs."""

    def _last_pruning(self, step: int) -> int | None:
        """The last graph task that pruned and had finished by `step`."""
        i = bisect.bisect_right(self._ended_steps, step)
        return self._ended_tasks[i - 1] if i else None

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Lay out the pruning of the running graph tasks."""
        shown = tuple((gt.graph_task, gt.reentrant_depth, gt.min_topo_nr, gt.pruned, gt.needed, gt.captured)
                      for gt in state.graph_tasks) or self._last_pruning(state.step)
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
                rows.append((Text(f"  pruned  {self.labels.fit(name(node), self.name_width)} topo {topo} < min "
                                  f"{gt.min_topo_nr}"), node))
            if gt.needed or gt.captured:
                rows.append((Text(f"  exec_info: {len(gt.needed)} needed, {len(gt.captured)} captured"), None))
                rows.extend((Text(f"  needed  {name(n)}"), n) for n in gt.needed)
                rows.extend((Text(f"  capture {name(n)}"), n) for n in gt.captured)
            else:
                rows.append((Text("  exec_info empty: every reachable node runs", style="italic"), None))
        rows = rows or self._history_rows(state.step)
        self.rows = [text for text, _ in rows]
        self.row_nodes = [node for _, node in rows]
        self.rows_changed()

    def _history_rows(self, step: int) -> list[tuple[Text, int | None]]:
        """No graph task runs: say so, and recall the last pruning (its nodes stay `pruned` in the graph)."""
        rows: list[tuple[Text, int | None]] = [(Text("no graph task is running", style="italic"), None)]
        tid = self._last_pruning(step)
        if tid is not None:
            task = self.trace.index.tasks[tid]
            rows.append((Text(f"graph task {tid} (finished at step {task.end}): min_topo_nr {task.min_topo}",
                              style="bold"), None))
            for node in task.pruned:
                topo = self.trace.node(node).topological_nr
                rows.append((Text(f"  pruned  {self.labels.fit(self.labels.label(node), self.name_width)} topo "
                                  f"{topo} < min {task.min_topo}"), node))
        return rows

    def row_count(self) -> int:
        return len(self.rows)

    def node_at_row(self, index: int) -> int | None:
        return self.row_nodes[index]

    def row_text(self, index: int) -> Text:
        return self.rows[index].copy()
