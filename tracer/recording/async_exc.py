"""Raising an exception in another thread (`PyThreadState_SetAsyncExc`), and CPython 3.11's flag for it.

NOTE [the async-exception flag]
CPython 3.11 keeps one flag per interpreter for "some thread has an asynchronous exception to raise". Every
`PyThreadState_SetAsyncExc` call raises the flag, even one that clears a thread's pending exception; only a
thread that then raises its own pending exception lowers it. So a clear, or an exception sent to a thread that
ends before raising it, leaves the flag up with nothing to raise. Untraced code barely notices (each periodic
check finds nothing to do), but a thread running with a trace function checks the flag at every function
entry and, finding it up, checks again at the same instruction: it spins forever (sys.settrace followed by any
call; tests/tracer/test_async_exc.py reproduces it in a subprocess). agdb's TUI dropped an interrupt sent as
a recorded script ended by clearing it (SetAsyncExc with NULL), and every later line culprit recording in that
process hung. agdb never clears with NULL now.

`lower_flag()` lowers it from the calling thread the only way Python offers: it sends itself an exception and
raises it at once. Another thread's pending exception, sent at that very moment, would then wait for the
thread's next periodic check that finds another reason to stop; nothing agdb does sends one then.

Imports nothing of torch, textual or rich.
"""
from __future__ import annotations

import ctypes
import threading

# A prototype of our own: setting argtypes on ctypes.pythonapi's shared function object would change how the
# user's own calls to it convert their arguments (None would become Py_None instead of NULL).
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


class _Lowered(Exception):
    """The exception the calling thread sends itself to lower the flag."""


def interrupt(thread_ident: int) -> bool:
    """Raise KeyboardInterrupt in thread `thread_ident` at its next bytecode; False if no such thread."""
    return _set_async_exc(thread_ident, KeyboardInterrupt) == 1


def drop_interrupt() -> None:
    """Drop an interrupt sent to the calling thread and not raised yet, leaving the flag down: the exception
    lower_flag() sends replaces it. (Clearing it with NULL would raise the flag, and a thread with a trace
    function would spin at the very next call: NOTE [the async-exception flag].)"""
    lower_flag()


def lower_flag() -> None:
    """Lower the interpreter's async-exception flag (NOTE [the async-exception flag])."""
    try:
        _set_async_exc(threading.get_ident(), _Lowered)  # replaces whatever this thread had pending
        _checkpoint()  # the flag is checked on return from a C call, and at a Python call's entry at the latest
    except _Lowered:
        return


def _checkpoint() -> None:
    return None
