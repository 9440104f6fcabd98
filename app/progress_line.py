"""One line of progress on stderr while agdb records, freezes or saves: the phase, the events so far, the time elapsed.

Shown only when stderr is a terminal (never in a pipe, a file or a CI log), and erased when the work ends. The
line is drawn by Rich (a `rich.progress.Progress` used as a renderable) from a thread of its own, which polls a
`RunProgress` a few times a second (NOTE [progress by polling] in run_progress.py).

NOTE [the progress line and the script's output]
The script runs in agdb's process, on the main thread, and prints to the same terminal. Rich's Live display would
take over `sys.stdout` and send the script's prints to its console, that is to stderr, so that `agdb record
s.py > out.txt` would put them on the terminal instead of in the file (and hold back a `\\r` progress bar of the
script's own until its next newline). Here the script's streams stay its own: a stream that is a terminal is wrapped
so that each write first erases the progress line and then goes, unchanged, to the real stream; the line is drawn
again on the next tick, but only while every such stream is at the start of a line (a script's half-written line,
or a `\\r` bar of its own, is never overwritten). A stream that is not a terminal is left alone.
The drawing thread only writes to stderr, under one re-entrant lock with the wrapped writes (a signal handler
that prints while the main thread writes takes it again): it installs no handler and blocks no signal, so Ctrl-C
and SIGTERM stop and save a recording as they do without it (NOTE [signals and the script] in signals.py). A
process the script forks (a DataLoader's workers) has no drawing thread: there the line is off and its lock new, so
that a child forked while the thread held the lock can still print.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Column

from .run_progress import RunProgress

TICK_SECONDS = 0.25
"""How often the line is drawn again (the events counter is read that often: it costs the recording nothing)."""
BAR_WIDTH = 16
BAR_FROM_WIDTH = 60
"""The bar (pulsing while the script runs, filling while agdb freezes or saves) is drawn on terminals this wide."""
_ERASE = "\r\x1b[2K"
_HIDE_CURSOR, _SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def elapsed_text(seconds: float) -> str:
    """`m:ss` (or `h:mm:ss`) since the work began."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_text(progress: RunProgress, counting: bool = True) -> str:
    """The line's words: `running script · 12,345 events · 0:07` (the TUI shows the same)."""
    parts = [progress.phase]
    if counting:
        parts.append(f"{progress.events:,} events")
    if progress.total:
        parts.append(f"{100 * progress.done // progress.total}%")
    parts.append(elapsed_text(time.monotonic() - progress.started))
    return " · ".join(parts)


class ProgressLine:
    """`with ProgressLine(progress, console):` shows the progress line while the block runs, when the console's
    file is a terminal; otherwise does nothing. `counting=False`: a phase with no events to count."""

    def __init__(self, progress: RunProgress, console: Console, counting: bool = True) -> None:
        self.progress, self.console, self.counting = progress, console, counting
        self.is_shown = console.is_interactive  # a terminal, not dumb, and not TTY_INTERACTIVE=0 (rank_worker.py)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._drawn = False
        self._mid_line: set[int] = set()  # ids of wrapped streams whose last write did not end a line
        self._out: TextIO = sys.stderr
        self._wrapped: dict[str, _AboveProgress] = {}
        self._remove_listener: Any = None
        if self.is_shown:
            self._bar, self._task = self._make_bar(console)

    @staticmethod
    def _make_bar(console: Console) -> tuple[Progress, Any]:
        """Rich's progress, used as the renderable of one line: spinner, bar (when there is room), words."""
        columns: list[Any] = [SpinnerColumn(table_column=Column(no_wrap=True))]
        if console.width >= BAR_FROM_WIDTH:  # a narrow terminal keeps the words, not the bar
            columns.append(BarColumn(bar_width=BAR_WIDTH, table_column=Column(no_wrap=True)))
        columns.append(TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis")))
        bar = Progress(*columns, console=console, auto_refresh=False, transient=True)
        return bar, bar.add_task("", total=None)

    def __enter__(self) -> ProgressLine:
        if not self.is_shown:
            return self
        self._out = self.console.file  # the real stderr, before it is wrapped
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if _is_terminal(stream):
                self._wrapped[name] = _AboveProgress(stream, self)
                setattr(sys, name, self._wrapped[name])
        self._write(_HIDE_CURSOR)
        self.draw()
        self._remove_listener = self.progress.on_change(self.draw)  # each phase is drawn, however short
        _SHOWN.add(self)
        threading.Thread(target=self._tick, name="agdb-progress", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Erase the line and give the script's streams back (again: nothing)."""
        if not self.is_shown:
            return
        self._stop.set()
        if self._remove_listener is not None:
            self._remove_listener()
        with self._lock:
            for name, wrapper in self._wrapped.items():
                if getattr(sys, name) is wrapper:  # the script may have set a stream of its own since
                    setattr(sys, name, wrapper.real)
            self._wrapped.clear()
            _SHOWN.discard(self)
            self.erase()
            self._write(_SHOW_CURSOR)
            self.is_shown = False

    def forked(self) -> None:
        """In a child the script forked: no line, and a lock nobody holds."""
        self.is_shown, self._drawn, self._lock = False, False, threading.RLock()

    def draw(self) -> None:
        """Draw the line again, unless a stream of the script's is half-way through a line."""
        with self._lock:
            if not self.is_shown or self._mid_line:
                return
            progress = self.progress
            self._bar.update(self._task, description=progress_text(progress, self.counting),
                             total=progress.total or None, completed=progress.done)
            with self.console.capture() as captured:
                self.console.print(self._bar.get_renderable(), end="", crop=True, no_wrap=True, overflow="ellipsis")
            line = captured.get().split("\n", 1)[0]
            self._write(_ERASE + line)
            self._drawn = True

    def erase(self) -> None:
        """Erase the line if it is drawn (the cursor goes back to its start)."""
        with self._lock:
            if self._drawn:
                self._write(_ERASE)
                self._drawn = False

    def wrote(self, stream: _AboveProgress, text: str) -> None:
        """A wrapped stream wrote `text`: whether it is now half-way through a line."""
        if text:
            if text.endswith("\n"):
                self._mid_line.discard(id(stream))
            else:
                self._mid_line.add(id(stream))

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.draw()

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):  # the terminal went away: the work goes on without its line
            self.is_shown = False


class _AboveProgress:
    """The script's stdout or stderr while the progress line shows on the terminal: writes go to the real stream
    unchanged, after the line is erased (NOTE [the progress line and the script's output])."""

    def __init__(self, real: TextIO, line: ProgressLine) -> None:
        self.real = real
        self._line = line

    def write(self, text: str) -> int:
        with self._line._lock:
            self._line.erase()
            written = self.real.write(text)
            if "\n" in text or "\r" in text:
                self.real.flush()  # before the line is drawn again on stderr
            self._line.wrote(self, text)
        return written

    def writelines(self, lines: Any) -> None:
        for text in lines:
            self.write(text)

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ...: the real stream's
        return getattr(self.real, name)


_SHOWN: weakref.WeakSet[ProgressLine] = weakref.WeakSet()
"""The lines shown in this process, for the fork handler."""


def _after_fork_in_child() -> None:
    for line in list(_SHOWN):
        line.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False
