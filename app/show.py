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
from rich._wrap import divide_line  # Rich's own word wrap, linear: NOTE [show's long lists]
from rich.cells import cell_len, set_cell_size
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
        print_line(out, f"{'  ' * indent}{what}: " + " → ".join(g.names))
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
        shown = tasks if limit is None else tasks[:limit]
        rows = []
        for i, t in shown:
            pop, name, depth, seq = task_cells(labels, i, t)
            rows.append((pop, short(name), depth, seq))
        caption = [queue_note(q)] if q.tasks and node is None else []
        if len(shown) < len(tasks):
            was_cut = True
            caption.append(_more(len(tasks) - len(shown)))
        print_table(out, ("pop", "node", "depth", "seq_nr"), rows, "; ".join(caption) or None)
    return was_cut


def _print_dependencies(out: Console, labels: NodeLabels, rows: DependencyRows, limit: int | None,
                        node: int | None) -> bool:
    """The counted nodes as the dependencies panel shows them; whether the list was cut."""
    chosen = rows.of_node(node) if node is not None else rows.rows(0, len(rows) if limit is None else limit)
    if not chosen:
        return False
    out.print(Text("dependencies and input buffers:"))
    cells = [(short(labels.label(row.node)), str(row.count), slots_text(row.filled), "yes" if row.is_changed else "")
             for row in chosen]
    left = len(rows) - len(chosen) if node is None else 0
    print_table(out, ("node", "to go", "buffer", "changed"), cells, _more(left) if left else None)
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


# NOTE [show's long lists]
# Rich lays a table out cell by cell (about 0.3 ms a row: 5 minutes for a million) and wraps a long line in time
# that grows with the square of its length (1.3 s for 40,000 names, far more for a million). `agdb show --all`
# prints every row, so past FAST_ROWS rows, or for a line past FAST_LINE characters, agdb lays the text out itself,
# exactly as Rich would (tests/app/test_show_long_lists.py compares the two), and writes it in a few large writes.
# One difference: a table wider than the terminal is not squeezed into it (Rich would wrap its cells); its rows
# run past the edge, one line each.
FAST_ROWS = 200
"""Tables of more rows are laid out by agdb (NOTE [show's long lists])."""
FAST_LINE = 2000
"""Lines of more characters are wrapped by agdb (NOTE [show's long lists])."""
_CHUNK_ROWS = 20_000
"""Rows written at a time: few writes, and no copy of a million rows' text at once."""


def print_table(out: Console, headers: tuple[str, ...], rows: list[tuple[str, ...]], caption: str | None) -> None:
    """A table of plain text cells, as Rich's default Table draws it, with `caption` (Rich markup) under it."""
    if len(rows) <= FAST_ROWS:
        table = Table()
        for header in headers:
            table.add_column(header)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        table.caption = caption
        out.print(table)
        return
    widths = [max(_cells(h), *(_cells(row[i]) for row in rows)) for i, h in enumerate(headers)]
    out.print(Text("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓"))
    header = Text("┃")
    for h, w in zip(headers, widths, strict=True):
        header.append(" ")
        header.append(_pad(h, w), "table.header")
        header.append(" ┃")
    out.print(header)
    out.print(Text("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩"))
    for start in range(0, len(rows), _CHUNK_ROWS):
        lines = ["│ " + " │ ".join(_pad(c, w) for c, w in zip(row, widths, strict=True)) + " │\n"
                 for row in rows[start:start + _CHUNK_ROWS]]
        _write(out, "".join(lines))
    _write(out, "└" + "┴".join("─" * (w + 2) for w in widths) + "┘\n")
    if caption:
        out.print(caption, style="table.caption", justify="center", highlight=False,
                  width=sum(widths) + 3 * len(widths) + 1)


def print_line(out: Console, text: str) -> None:
    """One line of plain text (no markup), wrapped at the console's width as Rich wraps it."""
    if len(text) <= FAST_LINE or "\n" in text or "\t" in text:
        out.print(Text(text))
        return
    width = out.width
    cuts = [0, *divide_line(text, width, fold=True), len(text)]
    lines = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        line = text[a:b]
        if len(line) > width:  # Text.rstrip_end: the spaces past the width go
            line = line[:len(line) - min(len(line) - len(line.rstrip()), len(line) - width)]
        lines.append((set_cell_size(line, width) if _cells(line) > width else line) + "\n")
    for start in range(0, len(lines), _CHUNK_ROWS):
        _write(out, "".join(lines[start:start + _CHUNK_ROWS]))


def _cells(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _cells(text))


def _write(out: Console, text: str) -> None:
    """Text written as is, after what `out` holds: no markup, no wrapping, no per-line work."""
    out.file.write(text)
