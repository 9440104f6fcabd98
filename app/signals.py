"""SIGINT, SIGTERM and SIGHUP while agdb records a script on its main thread: the script stops, what was recorded is
saved (marked partial), and agdb then ends as `python SCRIPT` killed by that signal would.

NOTE [signals and the script]
The script runs on agdb's main thread (NOTE [running the script in agdb's process] in run_script.py), so signals
reach it as they would under `python`: `signal.signal` works, and a handler the script installs replaces agdb's
for as long as it stays installed. agdb's own handlers, armed only for a signal whose disposition is still the
default (a SIGINT or SIGHUP the shell ignores, for a background job or under nohup, stays ignored), do this:
- while the script runs, SIGINT raises KeyboardInterrupt in it (as Python's own handler does), and SIGTERM and
  SIGHUP raise `Terminated`, so that the script unwinds to agdb, which keeps the trace. Unwinding rather than
  saving inside the handler: the handler may run while the recorder holds its lock.
- a signal that lands while agdb's recorder runs (a frame of agdb's tracer on the stack: a hook, the bridge's
  line tracer, its reconstruction after a backward) is held and tried again every few milliseconds, until it
  lands in the script's own code: an exception raised half-way through the recorder's bookkeeping would leave
  a trace that cannot be finished. A signal during a recorded backward on real PyTorch thus stops the script
  when the backward call returns (torch itself only looks for one between Python calls).
- before the script starts and after it ends (agdb finishing and saving the trace) a signal is held; once the
  trace is saved, agdb ends by it.
agdb ends by a signal the way Python ends after an uncaught KeyboardInterrupt: it restores the default
disposition and raises the signal on itself, so that the shell sees a process killed by it (a shell loop over
`agdb record` stops at Ctrl-C, `timeout` reports the signal) rather than an exit status of 128 + n.
A rank worker of `agdb torch --nproc` also saves when the signal finds the script blocked in C++, where no handler
runs (NOTE [a stop signal while blocked in C++] in blocked.py).

Never imports textual or rich.
"""
from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import agdb.tracer

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a recording and are then re-raised on agdb itself."""

SAVE_WHEN_BLOCKED = False
"""Whether `arm` also starts blocked.py's watcher (set by rank_worker.py)."""

RETRY_SECONDS = 0.005
"""How often a signal held while the recorder runs is tried again."""

_TRACER = str(Path(agdb.tracer.__file__).resolve().parent) + os.sep


class Terminated(BaseException):
    """SIGTERM or SIGHUP stopped the script: raised in it, so that agdb can keep what it recorded."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stopped_by(error: BaseException | None) -> int | None:
    """The signal a script's run ended by (a KeyboardInterrupt counts as SIGINT, as Python counts it), or None."""
    if isinstance(error, Terminated):
        return error.signum
    return signal.SIGINT if isinstance(error, KeyboardInterrupt) else None


class ScriptSignals:
    """agdb's handlers for STOPPING around a recorded script and the save after it (NOTE [signals and the script]).

    `arm()` installs them (on the main thread only); `script_started()` and `script_ended()` bracket the script;
    `held` is a signal that came while the script was not running; leaving the `with` block restores what was there.
    """

    def __init__(self) -> None:
        self._saved: dict[int, Any] = {}  # signal -> the handler before agdb's
        self._running = False
        self._pending: int | None = None  # held while the recorder runs, raised once the script's code does
        self._pending_lock = threading.Lock()  # a retry never fires after the handler raised (one signal, one raise)
        self.held: int | None = None
        """A signal that came while the script was not running: agdb ends by it once the trace is saved."""
        self.script_thread: int | None = None  # the ident of the thread the script runs on
        self.ended = threading.Event()  # set when the script stops
        self.taken = False  # blocked.py's watcher saves in the script's place: the handler parks the thread
        self.terminated = Terminated
        self.watcher: Any = None  # blocked.py's BlockedWatcher, when armed with SAVE_WHEN_BLOCKED

    @property
    def running(self) -> bool:
        """Whether the script's code runs (between script_started and script_ended)."""
        return self._running

    def __enter__(self) -> ScriptSignals:
        return self

    def __exit__(self, *exc: object) -> None:
        self._running = False
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        self._saved.clear()
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def arm(self) -> None:
        """Install agdb's handler for each STOPPING signal whose disposition is the default; nothing off the main
        thread (where `signal.signal` cannot be called and no signal is delivered)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in STOPPING:
            current = signal.getsignal(signum)
            if signum not in self._saved and current in (signal.SIG_DFL, signal.default_int_handler):
                self._saved[signum] = current
                signal.signal(signum, self._handle)
        if SAVE_WHEN_BLOCKED and self.watcher is None:
            from .blocked import BlockedWatcher

            self.watcher = BlockedWatcher(self, tuple(self._saved))

    def script_started(self) -> None:
        """The script's code runs from now: a signal stops it (one held since `arm` does so at once)."""
        self.script_thread = threading.get_ident()
        self._running = True
        held, self.held = self.held, None
        if held is not None:
            self._raise(held)

    def script_ended(self) -> None:
        """The script stopped: hold signals until the trace is saved, with agdb's handlers back in place of any the
        script left installed."""
        self._running = False
        self.ended.set()
        with self._pending_lock:
            self._pending = None
        for signum in self._saved:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.taken:  # blocked.py's watcher is saving the trace and ending the process: this thread waits
            threading.Event().wait()
        if not self._running:
            self.held = self.held or signum
        elif _in_tracer(frame):
            self._hold_while_recording(signum)
        else:
            with self._pending_lock:
                self._pending = None
            self._raise(signum)

    def _raise(self, signum: int) -> None:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    def _hold_while_recording(self, signum: int) -> None:
        if self._pending is not None:
            return  # a retry is under way
        self._pending = signum
        threading.Thread(target=self._retry, args=(signum,), name="agdb-signal-retry", daemon=True).start()

    def _retry(self, signum: int) -> None:
        """Deliver a held signal again until the handler raises it or the script ends (or replaced our handler)."""
        tick = threading.Event()
        while True:
            with self._pending_lock:
                if self._pending != signum or not self._running or signal.getsignal(signum) != self._handle:
                    return
                _thread.interrupt_main(signum)  # runs the handler on the main thread, as the signal did
            tick.wait(RETRY_SECONDS)


def _in_tracer(frame: FrameType | None) -> bool:
    """Whether agdb's recorder is on the stack (a hook, the line tracer, the bridge's wrappers)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_TRACER):
            return True
        frame = frame.f_back
    return False


def end_by(signum: int) -> int:
    """End the process as one killed by `signum` (default disposition, raised on itself); returns 128 + signum only
    if the process survives that."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    return 128 + signum
