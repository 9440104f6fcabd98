"""`agdb show`'s text: the engine's state at one step, as the TUI's panels show it, at most `limit` rows per list.

The rows are the panels' own (tracer.replay.rows, tracer.views.panel_text), read for the rows printed only, so a
1M-node trace costs what a 20-row one does once the state is replayed: the ready queues, the dependencies and
input buffers (a count that changed at this step is marked, as the TUI highlights it), the nodes run by each
graph task, the pruning, the status line's sentence and, for `--node`, the node inspector's lines. Nodes are
named by tracer.views.labels. Names longer than NAME_WIDTH are cut with an ellipsis, and printed as text, never
as Rich markup.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agdb.tracer.replay.node_details import node_details
from agdb.tracer.replay.rows import DependencyRows, pruning_rows, ready_queue_rows
from agdb.tracer.replay.state import EngineState
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels, cut
from agdb.tracer.views.panel_text import detail_lines, pruning_lines, queue_note, queue_title, slots_text, task_cells
from agdb.tracer.views.sentences import sentence

NAME_WIDTH = 200
"""The longest name printed whole; longer ones keep their first NAME_WIDTH - 1 characters and an ellipsis."""

DEFAULT_LIMIT = 20
"""Rows printed per list unless `--limit N` or `--all` says otherwise."""


class StdoutConsole(Console):
    """A Console on stdout whose closed pipe (`agdb show | head`) raises BrokenPipeError for the CLI to end
    quietly with the status of a tool killed by SIGPIPE (Rich's own exits with status 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def short(text: str, width: int = NAME_WIDTH) -> str:
    """`text`, cut to `width` characters with an ellipsis when longer."""
    return cut(text, width)


@dataclass
class TaskGroup:
    """The nodes one graph task ran, in order, and the reentrant tasks started while it ran."""

    graph_task: int
    depth: int
    names: list[str] = field(default_factory=list)
    nested: list[TaskGroup] = field(default_factory=list)


def executed_by_task(trace: Trace, step: int, limit: int | None) -> tuple[list[TaskGroup], int]:
    """The last `limit` nodes run by `step` (all with None), grouped by graph task in order of their first node,
    each reentrant task nested under the task of the next lower depth that ran before it; and how many earlier
    runs were left out."""
    starts = trace.steps_of(Kind.NODE_STARTED)
    end = int(np.searchsorted(starts, step, side="right"))
    begin = 0 if limit is None else max(0, end - limit)
    c = trace.columns
    depth_of = {int(c["ev_task"][s]): int(c["task_depth"][i])
                for i, s in enumerate(trace.steps_of(Kind.GRAPH_TASK_STARTED).tolist())}
    groups: dict[int, TaskGroup] = {}
    roots: list[TaskGroup] = []
    latest: dict[int, TaskGroup] = {}  # depth -> the task of that depth seen last
    labels = NodeLabels(trace)
    for s in starts[begin:end].tolist():
        task = int(c["ev_task"][s])
        group = groups.get(task)
        if group is None:
            group = groups[task] = TaskGroup(task, depth_of.get(task, 0))
            parent = latest.get(group.depth - 1) if group.depth > 0 else None
            (parent.nested if parent is not None else roots).append(group)
            latest[group.depth] = group
        group.names.append(short(labels.label(int(c["ev_node"][s]))))
    return roots, begin


def _print_groups(out: Console, groups: list[TaskGroup], indent: int = 1) -> None:
    for g in groups:
        what = f"graph task {g.graph_task}" + (f" (reentrant, depth {g.depth})" if g.depth else "")
        out.print(Text(f"{'  ' * indent}{what}: " + " → ".join(g.names)))
        _print_groups(out, g.nested, indent + 1)


def print_step(trace: Trace, state: EngineState, before: EngineState | None, out: Console, limit: int | None,
               node: int | None = None, note: str = "") -> None:
    """Print the state at a step for people: the panels' rows, at most `limit` per list (None: all).

    Args:
        trace: the trace, made safe to print (Trace.for_display).
        before: the state a step before (None at step 0): the dependencies mark the counts that changed.
        node: only this node's rows, after the node inspector's lines.
        note: a line to say first (what the trace left out).
    """
    labels = NodeLabels(trace)
    out.print(Text.assemble((f"step {state.step}", "bold"), f" of {state.num_steps - 1}: ",
                            (type(state.event).__name__, "cyan")))
    out.print(Text(short(sentence(state.event, labels), 4 * NAME_WIDTH)))
    if note:
        out.print(Text(f"note: {note}", style="yellow"))
    if node is not None:
        for line in detail_lines(labels, node_details(trace, node, state.step)):
            out.print(Text(line.text, style="bold" if line.tag == "title" else ""))
    cut_lists = _print_queues(out, trace, labels, state, limit, node)
    cut_lists |= _print_dependencies(out, labels, DependencyRows(state, before), limit, node)
    cut_lists |= _print_executed(out, trace, labels, state, limit, node)
    lines = [line for line in pruning_lines(labels, pruning_rows(trace, state))
             if node is None or line.node in (None, node)]
    if lines:
        out.print(Text("pruning:"))
        for line in lines:
            out.print(Text("  " + short(line.text)))
    running = ", ".join(short(labels.label(n)) for _, n in state.running if node is None or n == node)
    out.print(Text(f"running: {running or 'nothing'}  culprits so far: {state.culprits}"))
    if cut_lists and limit is not None:
        out.print(Text(f"(at most {limit:,} rows per list: --limit N or --all shows more)", style="dim"))


def _more(count: int, word: str = "more") -> str:
    return f"… {count:,} {word}"


def _print_queues(out: Console, trace: Trace, labels: NodeLabels, state: EngineState, limit: int | None,
                  node: int | None) -> bool:
    """The ready queues as the queues panel shows them; whether a list was cut."""
    was_cut = False
    for q in ready_queue_rows(state):
        out.print(Text(f"ready queue {queue_title(trace, q)}"))  # not the table's title: that wraps to its width
        tasks = [(i, t) for i, t in enumerate(q.tasks) if node is None or t.node == node]
        if not tasks:
            continue
        table = Table()
        for col in ("pop", "node", "depth", "seq_nr", "id"):
            table.add_column(col)
        shown = tasks if limit is None else tasks[:limit]
        for i, t in shown:
            pop, name, depth, seq = task_cells(labels, i, t)
            table.add_row(pop, Text(short(name)), depth, seq, "-" if t.node is None else str(t.node))
        caption = [queue_note(q)] if q.tasks and node is None else []
        if len(shown) < len(tasks):
            was_cut = True
            caption.append(_more(len(tasks) - len(shown)))
        table.caption = "; ".join(caption) or None
        out.print(table)
    return was_cut


def _print_dependencies(out: Console, labels: NodeLabels, rows: DependencyRows, limit: int | None,
                        node: int | None) -> bool:
    """The counted nodes as the dependencies panel shows them; whether the list was cut."""
    chosen = rows.of_node(node) if node is not None else rows.rows(0, len(rows) if limit is None else limit)
    if not chosen:
        return False
    out.print(Text("dependencies and input buffers:"))
    table = Table()
    for col in ("node", "to go", "buffer", "changed", "id"):
        table.add_column(col)
    for row in chosen:
        table.add_row(Text(short(labels.label(row.node))), str(row.count), Text(slots_text(row.filled)),
                      "yes" if row.is_changed else "", str(row.node))
    left = len(rows) - len(chosen) if node is None else 0
    if left:
        table.caption = _more(left)
    out.print(table)
    return left > 0


def _print_executed(out: Console, trace: Trace, labels: NodeLabels, state: EngineState, limit: int | None,
                    node: int | None) -> bool:
    """The nodes run so far, by graph task (or, for one node, when it ran); whether the list was cut."""
    if node is not None:
        ran = np.flatnonzero(state.executed.array() == node)
        out.print(Text("executed: " + (", ".join(f"#{i}" for i in ran.tolist()) if len(ran) else "not yet")))
        return False
    groups, left = executed_by_task(trace, state.step, limit)
    if not groups:
        out.print(Text("executed: -"))
        return False
    out.print(Text("executed, by graph task:" + (f" ({_more(left, 'earlier')})" if left else "")))
    _print_groups(out, groups)
    return left > 0
