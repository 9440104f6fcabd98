"""HelpScreen: every key of the step screen as it is typed, and a legend of what the panels show."""
from __future__ import annotations

from typing import Iterable

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from tracer.node_states import STATE_LABEL, STATE_TEXT, STATES
from widgets.forward_backward import FLAG_MEANING, FLAG_TEXT
from widgets.labels import MAX_SEQ

STATE_ORDER = ("not_created", "unreached", "counted", "waiting", "to_push", "ready", "running", "done", "raised",
               "pruned", "skipped", "captured")
"""The states in the order a node goes through them (the legend's order)."""
assert sorted(STATE_ORDER) == sorted(STATES)


def keys_text(binding: Binding) -> str:
    """A binding's keys as they are typed: `:`, `/`, `]`, `?`, `←, h` (not `colon`, `question_mark`)."""
    return ", ".join(format_key(k.strip()) for k in binding.key.split(","))


def legend_text(state_styles: dict[str, Style]) -> Text:
    """The states of the graph panel in the colours it draws them, with the other marks the panels use."""
    text = Text()
    text.append("Node states (graph panel, state column)\n", style="bold")
    for state in STATE_ORDER:
        text.append(f"  {STATE_LABEL[state]:<12}", style=state_styles.get(state, ""))
        text.append(f" {STATE_TEXT[state]}\n")
    text.append("\nMarks\n", style="bold")
    marks = [("#", "the execution index: the order nodes started running in"),
             (f"seq_nr {MAX_SEQ}", "UINT64_MAX (2**64-1), the seq_nr of every AccumulateGrad: it runs last among ties"),
             ("leaf N", "the Nth AccumulateGrad the forward pass made (all have seq_nr max)"),
             ("▶", "the row of the selected node (Enter on a row selects it)"),
             ("[x.]", "a node's input buffer: x for each slot that holds a grad, . for one still waiting")]
    marks += [(f"⚑ {FLAG_TEXT[f]}", meaning) for f, meaning in FLAG_MEANING.items()]
    for mark, meaning in marks:
        text.append(f"  {mark:<16}", style="bold")
        text.append(f" {meaning}\n")
    return text


class HelpScreen(ModalScreen[None]):
    """Lists the bindings it is given and the legend; Escape, ? or q closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 96%; height: auto; max-height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: Iterable[Binding], state_styles: dict[str, Style] | None = None) -> None:
        super().__init__()
        self.bindings_shown = list(bindings)
        self.state_styles = state_styles or {}

    def compose(self) -> ComposeResult:
        # Text, not markup: `push [NAME]` and other brackets are shown as written.
        text = Text()
        text.append("agdb keys\n\n", style="bold")
        for b in self.bindings_shown:
            text.append(f"  {keys_text(b):<14}", style="bold")
            text.append(f" {b.tooltip or b.description}\n")
        text.append("\nIn a panel: ↑/↓ or j/k move the cursor, home/end go to its first and last row, a click moves\n"
                    "it, Enter or a double-click selects its node (every panel marks it and the node inspector\n"
                    "shows it) or, in the event log, goes to that step. Tab and shift+Tab move between panels;\n"
                    "ctrl+p opens the command palette.\n"
                    "Search: a name or its start (Mul, accumulate) or a seq_nr (12, seq 12).\n"
                    "Breakpoints: node NAME, seq N, push [NAME], nan, error.\n\n")
        text.append_text(legend_text(self.state_styles))
        text.append("\nEscape, ? or q closes this help.")
        with VerticalScroll():
            yield Static(text)
