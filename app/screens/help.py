"""HelpScreen: every key of the step screen, with what it does."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    """Lists the bindings it is given; Escape or ? closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 72; height: auto; max-height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self.bindings_shown = bindings

    def compose(self) -> ComposeResult:
        lines = ["[b]agdb keys[/b]", ""]
        for b in self.bindings_shown:
            keys = ", ".join(k.strip() for k in b.key.split(","))
            lines.append(f"  [b]{keys:<22}[/b] {b.description}")
        lines += ["",
                  "In a panel: up/down or j/k move the cursor, Enter selects its node (every panel marks it",
                  "and the node inspector shows it) or, in the event log, goes to that step.",
                  "Tab and shift+Tab move between panels; ctrl+p opens the command palette.",
                  "Breakpoints: node NAME, seq N, push [NAME], nan, error.",
                  "Escape or ? closes this help."]
        with VerticalScroll():
            yield Static("\n".join(lines), markup=True)
