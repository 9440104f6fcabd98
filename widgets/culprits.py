"""CulpritsView: every sequence-number increment so far with its line; Enter shows the source."""
from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.message import Message

from agdb.tracer.recording.culprits import Culprit, TraceCulprits
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import shown_name, thread_labels

from .lazy_list import LazyList


class CulpritsView(LazyList):
    """One row per seq_nr bump up to the step (the culprits of the trace, in order)."""

    class CulpritSelected(Message):
        """The user chose a culprit; the screen shows its source."""

        def __init__(self, culprit: Culprit) -> None:
            super().__init__()
            self.culprit = culprit

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.culprits: Sequence[Culprit] = TraceCulprits(trace)  # decoded row by row as the panel shows them
        self.shown = 0
        self.threads = thread_labels(trace, trace.columns["ev_thread"][self.culprits.steps])
        """Each numbering thread's label, when more than one thread took numbers (else {}: no thread column)."""
        self.thread_width = max((len(n) for n in self.threads.values()), default=0)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Show the culprits that happened by the state's step."""
        count = state.culprits  # the seq_nr increments up to the step: TraceCulprits' first ones
        if count == self.shown and count:
            return  # nothing new: no repaint
        self.shown = count
        self.rows_changed()
        if count:
            self.cursor = count - 1

    def header(self) -> str:
        """The column headers: the counter before and after the bump, the node that took it, the thread (when
        several took numbers: each has its own counter), its line."""
        return f"{'seq_nr':>6} → {'next':<5} {'node':<28} {self._thread_cell('thread')}{'line':>5}  source"

    def _thread_cell(self, text: str) -> str:
        return f"{text:<{self.thread_width}} " if self.thread_width else ""

    def row_count(self) -> int:
        return max(self.shown, 1)

    def row_text(self, index: int) -> Text:
        if not self.shown:
            return Text("no sequence number was taken yet", style="italic")
        c = self.culprits[index]
        thread = self._thread_cell(self.threads.get(c.thread, ""))
        module = f"  ({c.module})" if c.module else ""  # the module call that made it (NOTE [module paths])
        return Text(f"{c.old:>6} → {c.new:<5} {shown_name(c.node_name):<28} {thread}{c.lineno:>5}: {c.source}{module}")

    def action_select(self) -> None:
        if self.shown:
            self.post_message(self.CulpritSelected(self.culprits[self.cursor]))
