"""OutputScreen: what the user's script printed while agdb recorded it under the TUI."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from agdb.tracer.store.printable import printable


class OutputScreen(ModalScreen[None]):
    """The script's stdout and stderr as it wrote them, scrollable; Escape, o or q closes it."""

    BINDINGS = [Binding("escape,o,q", "dismiss", "Close the script's output")]
    DEFAULT_CSS = """
    OutputScreen { align: center middle; }
    OutputScreen > VerticalScroll { width: 90%; height: 80%; border: round $accent; background: $surface;
                                    padding: 0 1; }
    """

    def __init__(self, output: str, script: str) -> None:
        super().__init__()
        self.output = output
        """The captured text (run_script.ScriptRun.output)."""
        self.script = script

    def compose(self) -> ComposeResult:
        scroll = VerticalScroll()
        scroll.border_title = f"what {printable(self.script)} printed (Escape closes)"
        with scroll:
            # Text, not markup: the script's output may hold [brackets]; printable: and escape sequences.
            body = printable(self.output, keep_newlines=True) if self.output else "(the script printed nothing)"
            yield Static(Text(body), id="script-output")
