"""`agdb diff A B --tui`: the two traces side by side, A's columns left of B's, differences marked.

Two tables: the seq_nrs each thread handed out (node and culprit line) and the node runs in order, each lined up
as a diff tool lines up two files (tracer.replay.diff.align: an extra op is one row with one side empty), nodes
named as every view names them (tracer/views/labels.py). `d` / `D` go to the next / previous difference in the
focused table; Tab switches tables. The data is tracer.replay.diff's (`compare`'s rows, lined up once): this
module only lays it out.
"""
from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from agdb.tracer.replay.diff import Comparison, Side, run_text, same_line, same_run
from agdb.tracer.store.printable import printable

_DIFF = "bold red"


def _cell(text: str, differs: bool) -> Text:
    return Text(printable(text), style=_DIFF if differs else "")


class DiffApp(App[int]):
    """Shows two traces' seq_nrs and node runs side by side."""

    TITLE = "agdb diff"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("d", "difference(1)", "Next difference"),
                Binding("D", "difference(-1)", "Previous difference")]
    CSS = """
    DataTable { height: 1fr; }
    .caption { background: $boost; padding: 0 1; }
    """

    def __init__(self, a: Side, b: Side, comparison: Comparison) -> None:
        super().__init__()
        self.a, self.b, self.comparison = a, b, comparison
        self.aspects, self.shifted = comparison.aspects, comparison.shifted
        self.differences: dict[str, list[int]] = {"bumps": [], "runs": []}

    def compose(self) -> ComposeResult:
        summary = "  ".join(f"{'=' if x.equal else '≠'} {x.name}" for x in self.aspects)
        yield Static(Text(printable(f"A: {self.a.label} ({self.a.source})    B: {self.b.label} ({self.b.source})")),
                     classes="caption")
        yield Static(Text(summary), classes="caption")
        yield Static("seq_nrs handed out, by thread, lined up as a diff tool lines up two files", classes="caption")
        yield DataTable(id="bumps", cursor_type="row", zebra_stripes=True)
        yield Static("node runs, in order", classes="caption")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        bumps = self.query_one("#bumps", DataTable)
        bumps.add_columns("thread", "A seq_nr", "A node", "A line", "B seq_nr", "B node", "B line", "")
        # rows lined up as a diff tool lines up two files (diff.align, once, by compare): an extra op is one row
        # with one side empty
        for row, (t, x, y) in enumerate(self.comparison.bumps):
            name_differs = x is None or y is None or x.name != y.name
            line_differs = not same_line(x, y)
            if name_differs or line_differs:
                self.differences["bumps"].append(row)
            bumps.add_row(str(t), str(x.seq) if x else "", _cell(x.label if x else "", name_differs),
                          _cell(x.where if x else "", line_differs), str(y.seq) if y else "",
                          _cell(y.label if y else "", name_differs), _cell(y.where if y else "", line_differs),
                          Text("≠", style=_DIFF) if name_differs or line_differs else "")
        runs = self.query_one("#runs", DataTable)
        runs.add_columns("#", "A ran", "B ran", "")
        for i, (x, y) in enumerate(self.comparison.runs):
            differs = not same_run(x, y, self.shifted)
            if differs:
                self.differences["runs"].append(i)
            runs.add_row(str(i), _cell(run_text(x) if x else "", differs), _cell(run_text(y) if y else "", differs),
                         Text("≠", style=_DIFF) if differs else "")
        first = "bumps" if self.differences["bumps"] or not self.differences["runs"] else "runs"
        table = self.query_one(f"#{first}", DataTable)
        table.focus()
        if self.differences[first]:
            table.move_cursor(row=self.differences[first][0])

    def action_difference(self, direction: int) -> None:
        """Move to the next (1) or previous (-1) difference of the focused table."""
        table = self.focused if isinstance(self.focused, DataTable) else self.query_one("#bumps", DataTable)
        rows = self.differences[table.id or "bumps"]
        here = table.cursor_row
        later = [r for r in rows if (r > here if direction > 0 else r < here)]
        if not later:
            self.notify("no more differences this way", timeout=3)
            return
        table.move_cursor(row=later[0] if direction > 0 else later[-1])
