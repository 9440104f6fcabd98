"""EventLog: the trace's events around the step, one per line, read from the trace on demand."""
from __future__ import annotations

from dataclasses import fields

from rich.text import Text
from textual.message import Message

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace

from .lazy_list import LazyList

_SKIP = {"step", "thread", "graph_task", "filename", "function", "inputs", "outputs", "next_edges", "grad",
         "dependencies", "pruned", "needed", "captured", "roots"}


def describe(event, queue_label=None) -> str:
    """A one-line summary of an event; `queue_label` names queues for people (Trace.queue_label)."""
    parts = []
    for f in fields(event):
        if f.name in _SKIP:
            continue
        value = getattr(event, f.name)
        if f.name == "queue" and queue_label is not None:
            value = queue_label(value)
        parts.append(f"{f.name}={value!r}")
    return f"{type(event).__name__}  " + " ".join(parts)


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

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Move the cursor to the state's step."""
        self.rows_changed()
        self.cursor = state.step

    def header(self) -> str:
        """The column headers."""
        return f"{'step':>7}  event"

    def row_count(self) -> int:
        return len(self.trace)

    def row_text(self, index: int) -> Text:
        return Text(f"{index:>7}  {describe(self.trace[index], self.trace.queue_label)}")

    def row_key(self, index: int) -> object:
        return index  # an event's line never changes

    def node_at_row(self, index: int) -> int | None:
        node = self.trace.event_node(index)
        return node if node >= 0 else None

    def action_select(self) -> None:
        self.post_message(self.StepChosen(self.cursor))
