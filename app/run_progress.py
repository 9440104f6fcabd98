"""How far a recording has got, for a display to poll: its phase, the events recorded so far, and the time since it
began.

NOTE [progress by polling]
A recording can take minutes, and nothing of it may slow down for being watched: the recorder appends events on
its hottest path, where even a callback per event would show in bench/. So nothing is pushed to a display. The run
only writes down its phase when that changes (a few times per run), and the events so far are read from the trace
source's own counter (`TraceSource.num_events`, an int any thread may read) when the display asks, a few times a
second: from a thread of its own on the command line (app/progress_line.py), from a timer of the TUI's event loop.
The engine and the tracer know nothing of either.

Never imports textual or rich.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

RUNNING = "running script"
RECONSTRUCTING = "reconstructing"
FREEZING = "freezing trace"
SAVING = "saving"


class RunProgress:
    """A recording's progress: written by the run at each change of phase, read by a display from any thread."""

    def __init__(self, phase: str = "starting") -> None:
        self.started = time.monotonic()
        """When the work began (`time.monotonic()`): a display shows the time elapsed since."""
        self.phase = phase
        """What is being done now, in a few words ("running script", "freezing trace", ...)."""
        self.done = 0
        self.total = 0
        """How far the phase is, out of `total`, when it knows its length (0: it does not)."""
        self._source: Any = None
        self._events = 0
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def events(self) -> int:
        """The events recorded so far: the source's own counter while it records, then the trace's length."""
        source = self._source
        return source.num_events if source is not None else self._events

    def watch(self, source: Any) -> None:
        """Count the events of `source` (a TraceSource) from now on."""
        self._source = source

    def settle(self, events: int) -> None:
        """The recording is over with `events` events: stop reading its source."""
        self._events, self._source = events, None

    def enter(self, phase: str, total: int = 0) -> None:
        """Begin `phase` (of `total` steps, when it knows how many); a display shows it at once."""
        self.phase, self.done, self.total = phase, 0, total
        self._changed()

    def advance(self, done: int, total: int) -> None:
        """`done` of the phase's `total` steps are done (a builder's or a save's progress callback)."""
        self.done, self.total = done, total
        if done == 0 or done == total:
            self._changed()

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` (from the thread that changed it) whenever the phase changes; returns a function that
        stops the calls."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _changed(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
