"""`agdb show`'s text: the engine's state at one step, as at most `limit` rows per list.

What it prints comes from the `agdb.state/1` object (tracer.replay.state_json), built for the rows asked for only,
so a 1M-node trace costs what a 20-row one does once the state is replayed. Names longer than NAME_WIDTH are
cut with an ellipsis, and printed as text, never as Rich markup.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agdb.tracer.store.schema import UINT64_MAX, Kind, short_name

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
    return text if len(text) <= width else text[:width - 1] + "…"


@dataclass
class TaskGroup:
    """The nodes one graph task ran, in order, and the reentrant tasks started while it ran."""

    graph_task: int
    depth: int
    names: list[str] = field(default_factory=list)
    nested: list[TaskGroup] = field(default_factory=list)


def node_label(trace) -> Callable[[int], str]:
    """How `show` names a node: its short name and seq_nr (`MulBackward0 (seq 3)`), an AccumulateGrad by its leaf
    as the TUI does (`AccumulateGrad (fc1.weight)`, `AccumulateGrad (leaf 2)`: tracer.store.leaf_labels),
    and another node with no number of its own by its node index (`Error (#4)`)."""
    leaves = trace.index.leaf_labels

    def label(node: int) -> str:
        name, seq, _ = trace.node_brief(node)
        leaf = leaves.get(node)
        if leaf is not None:
            return f"{short(short_name(name))} ({short(leaf)})"
        return short(short_name(name)) + (f" (#{node})" if seq == UINT64_MAX else f" (seq {seq})")

    return label


def run_name(trace) -> Callable[[int | None, str], str]:
    """How `show` names a node in a list of names (queues, runs): its short name, an AccumulateGrad followed by
    its leaf (`AccumulateGrad fc1.weight`); `name(node, recorded_name)`, node None for a wake-up task."""
    leaves = trace.index.leaf_labels

    def name(node: int | None, recorded: str) -> str:
        leaf = leaves.get(node) if node is not None else None
        return short(f"AccumulateGrad {leaf}" if leaf is not None else short_name(recorded))

    return name


def executed_by_task(trace, step: int, limit: int | None) -> list[TaskGroup]:
    """The last `limit` nodes run by `step` (all with None), grouped by graph task in order of their first node,
    each reentrant task nested under the task of the next lower depth that ran before it."""
    starts = trace.steps_of(Kind.NODE_STARTED)
    end = int(np.searchsorted(starts, step, side="right"))
    begin = 0 if limit is None else max(0, end - limit)
    c = trace.columns
    depth_of = {int(c["ev_task"][s]): int(c["task_depth"][i])
                for i, s in enumerate(trace.steps_of(Kind.GRAPH_TASK_STARTED).tolist())}
    groups: dict[int, TaskGroup] = {}
    roots: list[TaskGroup] = []
    latest: dict[int, TaskGroup] = {}  # depth -> the task of that depth seen last
    name = run_name(trace)
    for s in starts[begin:end].tolist():
        task = int(c["ev_task"][s])
        group = groups.get(task)
        if group is None:
            group = groups[task] = TaskGroup(task, depth_of.get(task, 0))
            parent = latest.get(group.depth - 1) if group.depth > 0 else None
            (parent.nested if parent is not None else roots).append(group)
            latest[group.depth] = group
        node = int(c["ev_node"][s])
        group.names.append(name(node, trace.node_name(node)))
    return roots


def _print_groups(out: Console, groups: list[TaskGroup], indent: int = 1) -> None:
    for g in groups:
        what = f"graph task {g.graph_task}" + (f" (reentrant, depth {g.depth})" if g.depth else "")
        out.print(Text(f"{'  ' * indent}{what}: " + " → ".join(short_name(n) for n in g.names)))
        _print_groups(out, g.nested, indent + 1)


def print_state(data: dict, out: Console, limit: int | None, node_title: str = "", note: str = "",
                label: Callable[[int], str] = str, executed: list[TaskGroup] | None = None,
                name: Callable[[int | None, str], str] | None = None) -> None:
    """Print an `agdb.state/1` object, made by state_to_json with `limit`, for people.

    `label` names a node by its index (node_label); `name` a node in a list of names (run_name; default: its
    short recorded name); `executed`, the executed nodes grouped by graph task (executed_by_task), replaces the
    flat list.
    """
    if name is None:
        def name(node: int | None, recorded: str) -> str:
            return short(recorded)

    omitted = data.get("omitted", {})

    def more(name: str, earlier: bool = False) -> str:
        n = omitted.get(name, 0)
        return f"… {n:,} {'earlier' if earlier else 'more'}" if n else ""

    event = data["event"]
    out.print(Text.assemble((f"step {data['step']}", "bold"), f" of {data['num_steps'] - 1}: ",
                            (event["kind"], "cyan")))
    if note:
        out.print(Text(f"note: {note}", style="yellow"))
    if node_title:
        out.print(Text(node_title))
    for q in data["ready_queues"]:
        table = Table(title=Text(f"ready queue {q['label']}"), title_justify="left")
        for col in ("pop", "node", "name", "priority (depth, seq_nr)"):
            table.add_column(col)
        for i, t in enumerate(q["tasks"]):
            table.add_row(str(i), str(t["node"]), Text(name(t["node"], t["name"])), str(tuple(t["priority"])))
        if omitted.get("ready_queues"):
            table.caption = more("ready_queues")
        out.print(table)
    if data["dependencies"]:
        _listing(out, "dependencies", [f"{label(int(n))}={c}" for n, c in data["dependencies"].items()],
                 more("dependencies"))
    if data["not_ready"]:
        _listing(out, "waiting for grads (x: slot filled)",
                 [f"{label(int(n))}={''.join('x' if f else '.' for f in slots)}"
                  for n, slots in data["not_ready"].items()], more("not_ready"))
    if executed:
        out.print(Text("executed, by graph task:" + (f" ({more('executed', earlier=True)})"
                                                     if more("executed", earlier=True) else "")))
        _print_groups(out, executed)
    else:
        names = [name(e["node"], e["name"]) for e in data["executed"]]
        if names and more("executed", earlier=True):
            names.insert(0, more("executed", earlier=True))
        out.print(Text("executed: " + (" → ".join(names) if names else "-")))
    pruned = ", ".join(map(label, data["pruned"])) + (f", {more('pruned')}" if more("pruned") else "")
    running = ", ".join(name(r["node"], r["name"]) for r in data["running"])
    out.print(Text(f"pruned: [{pruned}]  running: [{running}]  culprits so far: {data['culprits']}"))
    if omitted:
        out.print(Text(f"(at most {limit:,} rows per list: --limit N or --all shows more)", style="dim"))


def _listing(out: Console, label: str, parts: list[str], more: str) -> None:
    out.print(Text(f"{label}: " + ", ".join([*parts, more] if more else parts)))
