"""EventLog: the trace's events around the step, one per line, read from the trace on demand."""
from __future__ import annotations

from dataclasses import fields

from rich.text import Text
from textual.message import Message

from tracer.trace import Trace

from .lazy_list import LazyList

_SKIP = {"step", "thread", "graph_task", "filename", "function", "inputs", "outputs", "next_edges", "grad",
         "dependencies", "pruned", "needed", "captured", "roots"}


def describe(event) -> str:
    """A one-line summary of an event."""
    parts = [f"{f.name}={getattr(event, f.name)!r}" for f in fields(event) if f.name not in _SKIP]
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

    def follow(self, step: int) -> None:
        """Move the cursor to `step`."""
        self.rows_changed()
        self.cursor = step

    def row_count(self) -> int:
        return len(self.trace)

    def row_text(self, index: int) -> Text:
        return Text(f"{index:>7}  {describe(self.trace[index])}")

    def action_select(self) -> None:
        self.post_message(self.StepChosen(self.cursor))
