"""`agdb show`'s text: the engine's state at one step, as at most `limit` rows per list.

What it prints comes from the `agdb.state/1` object (tracer.state_json), built for the rows asked for only,
so a 1M-node trace costs what a 20-row one does once the state is replayed. Names longer than NAME_WIDTH are
cut with an ellipsis, and printed as text, never as Rich markup.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

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


def print_state(data: dict, out: Console, limit: int | None, node_title: str = "", note: str = "") -> None:
    """Print an `agdb.state/1` object, made by state_to_json with `limit`, for people."""
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
            table.add_row(str(i), str(t["node"]), Text(short(t["name"])), str(tuple(t["priority"])))
        if omitted.get("ready_queues"):
            table.caption = more("ready_queues")
        out.print(table)
    if data["dependencies"]:
        _listing(out, "dependencies", [f"{n}={c}" for n, c in data["dependencies"].items()], more("dependencies"))
    if data["not_ready"]:
        _listing(out, "waiting for grads (x: slot filled)",
                 [f"{n}={''.join('x' if f else '.' for f in slots)}" for n, slots in data["not_ready"].items()],
                 more("not_ready"))
    names = [short(e["name"]) for e in data["executed"]]
    if names and more("executed", earlier=True):
        names.insert(0, more("executed", earlier=True))
    out.print(Text("executed: " + (" → ".join(names) if names else "-")))
    pruned = ", ".join(map(str, data["pruned"])) + (f", {more('pruned')}" if more("pruned") else "")
    running = ", ".join(short(r["name"]) for r in data["running"])
    out.print(Text(f"pruned: [{pruned}]  running: [{running}]  culprits so far: {data['culprits']}"))
    if omitted:
        out.print(Text(f"(at most {limit:,} rows per list: --limit N or --all shows more)", style="dim"))


def _listing(out: Console, label: str, parts: list[str], more: str) -> None:
    out.print(Text(f"{label}: " + ", ".join([*parts, more] if more else parts)))
