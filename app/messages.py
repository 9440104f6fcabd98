"""App-level messages: a trace was loaded or failed to load, and loading progress."""
from __future__ import annotations

from typing import Any

from textual.message import Message


class TraceLoaded(Message):
    """A worker finished making or reading a trace."""

    def __init__(self, trace: Any, title: str, script_error: str = "") -> None:
        super().__init__()
        self.trace = trace
        self.title = title
        self.script_error = script_error


class TraceFailed(Message):
    """A worker could not make or read a trace; `error` says why."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class TraceProgress(Message):
    """Progress of a long load or recording; newer messages replace queued older ones."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TraceProgress)
