"""A stop signal that finds the script's thread blocked in C++: the trace is saved all the same (rank workers of
`agdb torch --nproc`).

NOTE [a stop signal while blocked in C++]
A signal's Python handler (NOTE [signals and the script] in signals.py) runs on the main thread only between
bytecodes. A thread blocked in C++ holding no GIL, as a rank is in a gloo collective its peers never join (the
usual DDP hang), never gets there, and torch's launcher SIGKILLs a rank 30 s after its SIGTERM: the trace would be
lost. So a rank worker also has a watcher thread. `signal.set_wakeup_fd` makes the C-level handler write each
signal's number to a socket the watcher reads; on a STOPPING signal while the script runs, the watcher gives the
script's thread GRACE seconds to take it itself (the handler raises there, or is held while agdb's recorder runs
Python, and agdb saves as usual once the script ends). If the script has not ended by then and the thread's
innermost Python frame has not moved (the same frame at the same instruction: it is inside one C call), its Python
state, the recorder's included, is still, and the watcher saves in its place:
- first it marks the signals as taken, so that should the thread wake (a peer that ended closes the collective's
  connection and torch raises), the handler, which runs before the thread's next few bytecodes, parks it instead of
  letting it run on into the recorder while the trace is being finished;
- then it finishes the recording (meta.partial, the signal's name) and adds meta.blocked: the script's line the
  thread was blocked under (innermost frame that is not torch's, agdb's or Python's own) and whether it was inside
  a backward call (whose events the bridge has not recorded yet: they are lost), saves, and ends the
  process with status 128 + signum (a thread other than the main one cannot take the signal's default action).
While the frame moves, the thread runs Python (agdb's recorder, whose bookkeeping a signal waits for, or the
script's code, where the handler raises): the watcher keeps waiting. A thread that wakes between the last look and
the park can run a few bytecodes of the recorder beside the watcher's finish; that window is the cost of not
stopping a thread Python cannot stop.

Never imports textual or rich; torch only when saving (it is loaded by then).
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from typing import Any, Callable

GRACE = 2.0
"""Seconds the script's thread is given to take a stop signal itself before the watcher saves in its place."""

_real_exit = os._exit  # the process's own: while the script runs, os._exit is agdb's (run_script.py)


class BlockedWatcher:
    """The watcher thread of NOTE [a stop signal while blocked in C++], for one ScriptSignals."""

    def __init__(self, signals: Any, stopping: tuple[int, ...]) -> None:
        self.signals, self.stopping = signals, stopping
        self.save: Callable[[BaseException, dict], int | None] | None = None
        """Set by the run: finish the recording with this error, add the meta, save; returns the exit status."""
        self._reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._writer = writer
        self._previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="agdb-blocked-watcher", daemon=True).start()

    def close(self) -> None:
        """Give the wakeup fd back (main thread only, as set_wakeup_fd wants)."""
        signal.set_wakeup_fd(self._previous)

    def _watch(self) -> None:
        while True:
            data = self._reader.recv(64)
            if not data:
                return
            for signum in data:
                if signum in self.stopping and self.signals.running:
                    self._take(signum)

    def _take(self, signum: int) -> None:
        ident = self.signals.script_thread
        while self.signals.running:
            before = _innermost(ident)
            if self.signals.ended.wait(GRACE):
                return  # the script took it, or ended: agdb saves as usual
            after = _innermost(ident)
            if before is not None and before == after and self.signals.running and self.save is not None:
                self._save_in_place(signum, ident)
                return

    def _save_in_place(self, signum: int, ident: int) -> None:
        self.signals.taken = True
        sys.setswitchinterval(1.0)  # fewer handovers to a thread that wakes while the trace is finished
        frame = sys._current_frames().get(ident)
        meta = {"blocked": {**script_line(frame), "in_backward": _in_backward(frame)}}
        error: BaseException = KeyboardInterrupt() if signum == signal.SIGINT else self.signals.terminated(signum)
        status = 128 + signum
        saved = True
        try:
            saved = self.save(error, meta) is not None  # type: ignore[misc]
        finally:
            if saved:  # else the script's os._exit is saving it, and ends the process itself
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except (OSError, ValueError):
                        pass
                _real_exit(status)


def _innermost(ident: int | None) -> tuple[Any, int] | None:
    """The thread's innermost Python frame and the instruction it is at (the frame held, so that its id is not
    reused by another between two looks)."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    return None if frame is None else (frame, frame.f_lasti)


def _in_backward(frame: Any) -> bool:
    """Whether the stack is inside a backward call: torch's `_engine_run_backward`, through which backward() and
    autograd.grad() enter the C++ engine, is on it (the bridge records a call's events when it returns)."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_engine_run_backward" and f"{os.sep}torch{os.sep}autograd{os.sep}" in code.co_filename:
            return True
        frame = frame.f_back
    return False


def script_line(frame: Any) -> dict[str, Any]:
    """The innermost frame of the user's code on a stack: {filename, lineno, name, source} ({} when none)."""
    import linecache

    from agdb.tracer.sources.torch.naming import is_library

    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # agdb's app/ (run_script's frames)
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_library(name) and not name.startswith(here):
            return {"filename": name, "lineno": frame.f_lineno, "name": frame.f_code.co_name,
                    "source": linecache.getline(name, frame.f_lineno).strip()}
        frame = frame.f_back
    return {}
