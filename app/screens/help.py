"""HelpScreen: every key of the step screen as it is typed, and a legend of what the panels show."""
from __future__ import annotations

from typing import Iterable

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from agdb.tracer.replay.node_states import STATE_LABEL, STATE_TEXT, STATES
from agdb.tracer.views.labels import MAX_SEQ
from agdb.widgets.forward_backward import FLAG_MEANING, FLAG_TEXT

STATE_ORDER = ("not_created", "unreached", "counted", "waiting", "to_push", "ready", "running", "done", "raised",
               "pruned", "skipped", "captured")
"""The states in the order a node goes through them (the legend's order)."""
assert sorted(STATE_ORDER) == sorted(STATES)


def keys_text(binding: Binding) -> str:
    """A binding's keys as they are typed: `:`, `/`, `]`, `?`, `←, h` (not `colon`, `question_mark`)."""
    return ", ".join(format_key(k.strip()) for k in binding.key.split(","))


def _table(rows: Iterable[tuple[Text, str]]) -> Table:
    """Two columns, the second wrapping under itself (not under the first)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column()
    for left, right in rows:
        table.add_row(left, right)
    return table


def legend_text(state_styles: dict[str, Style]) -> Group:
    """The states of the graph panel in the colours it draws them, and the other marks the panels use."""
    marks = [("#", "the execution index: the order nodes started running in"),
             (f"seq_nr {MAX_SEQ}", "UINT64_MAX (2**64-1), the seq_nr of every AccumulateGrad: it pops first at its "
              "depth"),
             ("fc1.weight, w", "an AccumulateGrad's leaf by its name: the parameter's path in its module, or the "
              "variable bound to it; `w (layer1)` and `#2` tell repeated names apart"),
             ("leaf N", "the Nth AccumulateGrad the forward pass made, for a leaf with no name (all have seq_nr max)"),
             ("▶", "the row of the selected node (Enter on a row selects it)"),
             ("[x.]", "a node's input buffer: x for each slot that holds a grad, . for one still waiting")]
    marks += [(f"⚑ {FLAG_TEXT[f]}", meaning) for f, meaning in FLAG_MEANING.items()]
    return Group(
        Text("Legend: node states, as the graph panel colours them", style="bold"),
        _table((Text(STATE_LABEL[s], style=state_styles.get(s, "")), STATE_TEXT[s]) for s in STATE_ORDER),
        Text("\nMarks", style="bold"),
        _table((Text(mark, style="bold"), meaning) for mark, meaning in marks))


class HelpScreen(ModalScreen[None]):
    """Lists the bindings it is given and the legend; Escape, ? or q closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Horizontal { width: 96%; height: 94%; border: round $accent; background: $surface; }
    HelpScreen VerticalScroll { width: 1fr; height: 1fr; padding: 0 1; }
    HelpScreen #legend { border-left: vkey $accent 50%; }
    """

    def __init__(self, bindings: Iterable[Binding], state_styles: dict[str, Style] | None = None,
                 more: Iterable[tuple[str, Iterable[Binding]]] = ()) -> None:
        """Args:
            bindings: the step screen's keys.
            more: (heading, keys) of the other places that answer keys: a panel, every list, the app.
        """
        super().__init__()
        self.bindings_shown = list(bindings)
        self.more = [(heading, list(keys)) for heading, keys in more]
        self.state_styles = state_styles or {}

    def compose(self) -> ComposeResult:
        # Text, not markup: `push [NAME]` and other brackets are shown as written.
        keys = Group(
            Text("agdb keys", style="bold"),
            _table((Text(keys_text(b), style="bold"), b.tooltip or b.description) for b in self.bindings_shown),
            *(part for heading, keys in self.more
              for part in (Text(f"\n{heading}", style="bold"),
                           _table((Text(keys_text(b), style="bold"), b.tooltip or b.description) for b in keys))),
            Text("\nA click moves a panel's cursor; Enter or a double-click selects its node (every panel marks it "
                 "and the node inspector shows it) or, in the event log, goes to that step. In the drawn graph a "
                 "click picks the box under the pointer. Tab and shift+Tab move between panels; ctrl+p opens the "
                 "command palette.\n"
                 "Search: a name or the start of one of its words (Mul, accumulate, grad) or a seq_nr (12, seq 12).\n"
                 "Breakpoints: node NAME, seq N, push [NAME], nan, error.\n"
                 "Escape, ? or q closes this help."))
        with Horizontal():
            with VerticalScroll(id="keys"):
                yield Static(keys)
            with VerticalScroll(id="legend"):
                yield Static(legend_text(self.state_styles))
