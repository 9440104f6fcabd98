"""EventLog: the trace's events around the step, one per line, read from the trace on demand."""
from __future__ import annotations

from rich.text import Text
from textual.message import Message

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.sentences import sentence

from .lazy_list import LazyList


class EventLog(LazyList):
    """Every event of the trace; the cursor follows the step."""

    class StepChosen(Message):
        """The user chose to go to `step`."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.labels = NodeLabels(trace)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Move the cursor to the state's step."""
        self.rows_changed()
        self.cursor = state.step

    def header(self) -> str:
        """The column headers."""
        return f"{'step':>7}  event (what the engine did, then the event's kind)"

    def row_count(self) -> int:
        return len(self.trace)

    def row_text(self, index: int) -> Text:
        # the status line's sentence, not the record's fields: a node by its label, seq_nr max as `max`; the
        # event's kind after it, dim, so that a narrow panel cuts the kind rather than the sentence
        event = self.trace[index]
        return Text.assemble(f"{index:>7}  {sentence(event, self.labels)}", (f"  {type(event).__name__}", "dim"))

    def row_key(self, index: int) -> object:
        return index  # an event's line never changes

    def node_at_row(self, index: int) -> int | None:
        node = self.trace.event_node(index)
        return node if node >= 0 else None

    def action_select(self) -> None:
        self.post_message(self.StepChosen(self.cursor))
