"""NOTE [the async-exception flag] in tracer/recording/async_exc.py: clearing a thread's pending exception leaves CPython
3.11's interpreter-wide flag up, and a thread with a trace function then spins forever at its next call. Each
case runs in its own interpreter, with a timeout: the spin never ends, and it would take the suite with it."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60  # seconds: a healthy run takes one or two (torch's import), a spinning one never finishes
SPIN_SHOWN = 5  # seconds: how long the test that shows the spin waits for it

# The flag goes up the way a clear through ctypes (NULL) raises it, on this thread, with nothing lowering it after.
RAISE_FLAG = """
import ctypes, threading
ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), None)
"""
TRACE = """
import sys
def tracer(frame, event, arg):
    return tracer
def f():
    return 1
sys.settrace(tracer)
"""
CALL = """
f()
sys.settrace(None)
print("finished")
"""
TRACE_AND_CALL = TRACE + CALL


def _run(*parts: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess | None:
    """The program made of `parts`, run; None when it was still running at the timeout (the spin)."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    try:
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the flag's behaviour is CPython 3.11's")


@needs_311
def test_a_raw_clear_then_a_trace_function_spins():
    """The cause, shown: without agdb's fix, the first call after sys.settrace never returns."""
    assert _run(RAISE_FLAG, TRACE_AND_CALL, timeout=SPIN_SHOWN) is None


@needs_311
def test_lower_flag_lets_a_traced_call_return():
    done = _run(RAISE_FLAG, "from agdb.tracer.recording.async_exc import lower_flag\nlower_flag()", TRACE_AND_CALL)
    assert done is not None and done.returncode == 0 and "finished" in done.stdout, done


def test_drop_interrupt_leaves_the_flag_down():
    """What the TUI does as every recorded script ends (before the fix, the clear it made raised the flag and
    every later line-culprit recording in the process hung): a trace function set afterwards works."""
    done = _run("""
        from agdb.tracer.recording.async_exc import drop_interrupt
        drop_interrupt()
        for _ in range(1000):  # loops and calls check for a pending exception: none is raised
            len(())
        """, TRACE_AND_CALL)
    assert done is not None and done.returncode == 0 and "finished" in done.stdout, done


def test_drop_interrupt_on_a_traced_thread_does_not_spin():
    """Dropping by clearing (NULL) would spin at the next call on a thread with a trace function; replacing the
    pending exception with one raised at once does not."""
    done = _run(TRACE, "from agdb.tracer.recording.async_exc import drop_interrupt\ndrop_interrupt()", CALL)
    assert done is not None and done.returncode == 0 and "finished" in done.stdout, done


def test_interrupt_raises_keyboard_interrupt_in_the_target_thread():
    caught, started = [], threading.Event()

    def target() -> None:
        started.set()
        try:
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                pass
        except KeyboardInterrupt:
            caught.append(threading.get_ident())

    from agdb.tracer.recording.async_exc import interrupt

    thread = threading.Thread(target=target)
    thread.start()
    started.wait()
    assert interrupt(thread.ident) is True
    thread.join(TIMEOUT + 5)
    assert caught == [thread.ident]
    assert interrupt(thread.ident) is False  # the thread is gone


def test_the_users_ctypes_function_is_left_as_it_was():
    """agdb calls SetAsyncExc through a prototype of its own: a program's own `pythonapi.PyThreadState_SetAsyncExc(
    ident, None)` still passes NULL (with argtypes set on the shared object, None would become Py_None)."""
    import ctypes

    from agdb.tracer.recording import async_exc  # noqa: F401

    assert ctypes.pythonapi.PyThreadState_SetAsyncExc.argtypes is None


@needs_311
def test_line_culprits_record_after_the_flag_was_left_up():
    """A recording with line culprits in a process where the flag is up (as after the TUI had recorded a script)
    finishes and puts the increment on its line: LineCulprits.attach lowers the flag."""
    pytest.importorskip("torch")
    done = _run(RAISE_FLAG, """
        import sys
        import torch
        from agdb import tracer
        from agdb.tracer.recording.culprits import of_trace
        x = torch.ones(2, requires_grad=True)
        with tracer.record("torch", culprits="lines") as rec:
            y = x.exp(); line = sys._getframe().f_lineno  # the culprit
        found = [(c.node_name, c.lineno) for c in of_trace(rec.trace)]
        assert found == [("ExpBackward0", line)], (found, line)
        print("finished")
        """)
    assert done is not None and done.returncode == 0 and "finished" in done.stdout, done
