"""Culprits: which Python line bumped the thread's sequence number, from X to Y.

Never imports textual or rich; imports the engine only inside `watch()`. `logging.getLogger("agdb.seq_nr")`,
when enabled for INFO, gets one line per increment while a Recorder or `watch()` is attached, e.g.
`seq_nr 41 -> 42 by MulBackward0 at model.py:17 in forward: y = x * w`, followed, when Python recorded which
expression of the line ran (3.11+), by a line of carets under it (tracer.recording.expression).
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from agdb.tracer.recording.expression import carets
from agdb.tracer.recording.frames import columns, source_line, user_frame
from agdb.tracer.store.events import SeqNrBumped
from agdb.tracer.store.schema import Kind

logger = logging.getLogger("agdb.seq_nr")


@dataclass(frozen=True, slots=True)
class Culprit:
    """One increment of a thread's sequence number and the line that caused it."""

    old: int
    new: int
    node_name: str
    thread: int
    filename: str
    lineno: int
    function: str
    source: str
    step: int
    col: int = -1  # source[col:end_col] is the expression that bumped it (-1: unknown)
    end_col: int = -1
    module: str = ""  # the module call that made the node (`model.fc1`: NOTE [module paths]), or ""

    def carets(self) -> str:
        """The caret line to print under `source` ("" when the columns are unknown): see tracer.recording.expression."""
        return carets(self.source, self.col, self.end_col)

    def line(self) -> str:
        """What the `agdb.seq_nr` logger emits: one line, and a line of carets under its source when known."""
        where = f"{os.path.basename(self.filename)}:{self.lineno}" if self.filename else "<unknown>"
        module = f" in {self.module}" if self.module else ""
        head = f"seq_nr {self.old} -> {self.new} by {self.node_name}{module} at {where} in {self.function}: "
        marks = self.carets()
        return head + self.source + (f"\n{' ' * len(head)}{marks}" if marks else "")


def from_event(e: SeqNrBumped, module: str = "") -> Culprit:
    """The culprit an event records (`module`: its node's module path, which the event does not carry)."""
    return Culprit(e.old, e.seq_nr, e.node_name, e.thread, e.filename, e.lineno, e.function, e.source, e.step,
                   e.col, e.end_col, module)


def _of_step(trace: Any, step: int) -> Culprit:
    e = trace[step]
    return from_event(e, trace.node(e.node).module if "frame_module" in trace.columns else "")


def select(culprits: Iterable[Culprit], start: int | None = None, stop: int | None = None) -> list[Culprit]:
    """The increments that moved the counter within [start, stop] (either bound may be None)."""
    return [c for c in culprits if (start is None or c.new > start) and (stop is None or c.old < stop)]


class TraceCulprits(Sequence[Culprit]):
    """The increments of a trace as a sequence whose items are decoded when read (for traces of any size)."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        self.steps = trace.steps_of(Kind.SEQ_NR_BUMPED)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return _of_step(self.trace, int(self.steps[i]))


def of_trace(trace: Any) -> list[Culprit]:
    """Every increment recorded in `trace`, in order."""
    return [_of_step(trace, int(s)) for s in trace.steps_of(Kind.SEQ_NR_BUMPED)]


def log_bump(node: Any, seq_nr: int, frame: Any, module: str = "") -> None:
    """Emit one `agdb.seq_nr` line for a bump seen live (callers check logger.isEnabledFor first)."""
    col = end_col = -1
    if frame is None:
        filename, lineno, function = "", 0, "?"
    else:
        filename, lineno, function = frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name
        col, end_col = columns(frame)
    source = source_line(filename, lineno) if filename else ""  # reads regular files only: no /dev/zero
    culprit = Culprit(seq_nr, seq_nr + 1, node.name(), 0, filename, lineno, function, source, -1, col, end_col,
                      module)
    logger.info(culprit.line())


class _Watcher:
    """An observer that only logs seq_nr bumps."""

    def seq_nr_bumped(self, node: Any, seq_nr: int) -> None:
        if logger.isEnabledFor(logging.INFO):
            log_bump(node, seq_nr, user_frame())


@contextmanager
def watch() -> Iterator[None]:
    """Log every seq_nr increment inside the block to `agdb.seq_nr`, without recording a trace."""
    from agdb.engine import add_observer

    handle = add_observer(_Watcher())
    try:
        yield
    finally:
        handle.remove()
