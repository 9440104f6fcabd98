"""Messages of the app and its step screen: loading a trace, and what the user did on the screen."""
from __future__ import annotations

from typing import Any

from textual.message import Message

from agdb.tracer.replay.breakpoints import Breakpoint


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


class StepChanged(Message):
    """The screen moved to `step`. An announcement for observers (tests, benchmarks, a future plugin): the
    screen itself routes the step to its panels through `state`."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class NodeFollowed(Message):
    """The user selected `node`; every panel now marks it (None: the selection was cleared)."""

    def __init__(self, node: int | None) -> None:
        super().__init__()
        self.node = node


class BreakpointHit(Message):
    """Running to a breakpoint stopped at `step`, on `breakpoint`."""

    def __init__(self, step: int, breakpoint: Breakpoint) -> None:
        super().__init__()
        self.step = step
        self.breakpoint = breakpoint


class GraphExported(Message):
    """An export worker wrote the graph at `step` to `path`; `summary` says what it drew."""

    def __init__(self, path: str, step: int, summary: str = "") -> None:
        super().__init__()
        self.path = path
        self.step = step
        self.summary = summary


class ExportFailed(Message):
    """An export worker could not write the picture; `error` says why and what to do instead."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
