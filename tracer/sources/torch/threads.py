"""The forward on every thread: threads started while recording get the recording's way of seeing the forward (their
own line tracer, or the mode pushed on their own stack), through `threading.settrace`.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable

from agdb.tracer.sources.torch.compiling import tracing
from agdb.tracer.sources.torch.lines import LineCulprits, _push
from agdb.tracer.sources.torch.state import BridgeState


def watch_new_threads(shared: BridgeState, lines: LineCulprits | None, mode: Any) -> Callable[[], None]:
    """NOTE [threads' line tracers]
    torch's sequence number is thread-local (each thread counts from 0), and so are both ways of seeing it: a trace
    function (`sys.settrace`) and a TorchFunctionMode. Python 3.11 sets a trace function on the calling thread only
    (3.12's `threading.settrace_all_threads` is missing), but `threading.settrace` installs a hook that each thread
    started from then on runs as its trace function at its first call. The bridge's hook gives the new thread its
    own LineCulprits (its counter, pending numbers and state; the recording thread's caches), or pushes the mode on
    the thread's own stack, then takes itself off. A thread gets its row in the trace when it takes its first
    number (BridgeState.thread_state), so rows follow the order in which threads first appear, by name, never by
    ident: the engine's Recorder numbers its threads the same way.

    What no hook reaches: a thread that was already running when the recording began (its forward ops are put on
    no line; its backward calls are recorded, and the walk names their nodes), and, when a `threading.settrace`
    hook was already set (coverage's), every other thread. When the recording ends, a thread still running takes
    its trace function off at its next call (and the frames of other threads lose theirs now); a mode pushed on a
    thread stays there, doing nothing, until the thread ends.

    Returns what puts things back; call it after the recording thread's own tracer is off.
    """
    if threading.gettrace() is not None:
        return lambda: None
    stopped = [False]

    def started(frame: Any, event: str, arg: Any) -> Any:
        sys.settrace(None)
        if stopped[0] or tracing():
            return None
        state = shared.unseen_thread_state()  # the counter as the thread begins: its first op's number is seen
        if lines is None:
            _push(mode)
            return None
        mine = lines.for_thread(state)
        shared.local.lines = mine
        return mine.start(frame, event, arg)

    threading.settrace(started)

    def stop() -> None:
        threading.settrace(None)
        stopped[0] = True
        if lines is not None:
            lines.stopped[0] = True
            _untrace_other_threads()

    return stop


def _untrace_other_threads() -> None:
    """Take the line tracers' local trace functions off the frames other threads are running."""
    me = threading.get_ident()
    for ident, f in sys._current_frames().items():
        while ident != me and f is not None:
            if getattr(f.f_trace, "__qualname__", "").startswith("LineCulprits._tracers."):
                f.f_trace = None
            f = f.f_back
