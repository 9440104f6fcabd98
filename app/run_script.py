"""Run a user's script under the recorder, keeping the trace even when the script raises."""
from __future__ import annotations

import ctypes
import runpy
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tracer import Recorder


@dataclass
class ScriptRun:
    """What running a script produced: the trace, and the script's error if it raised."""

    trace: Any
    error: BaseException | None
    error_text: str
    as_torch: bool = False  # whether `import torch` got agdb's engine
    note: str = ""  # what the user should know about an empty recording, and what to do


REAL_TORCH_NOTE = ("the script ran on real PyTorch, whose autograd engine agdb cannot record yet, so nothing was "
                   "recorded. Run it on agdb's engine with --as-torch (the default for a script that imports "
                   "torch).")


def run_recorded(script: str, args: list[str], as_torch: bool | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 on_script_end: Callable[[], None] | None = None) -> ScriptRun:
    """Run `script` with `args` as `__main__`, recording the engine; the trace is kept if the script fails.

    `as_torch`: let the script's `import torch` get agdb's engine; None (the default) does so when the
    script's source imports torch.

    `on_script_end` is called the moment the script stops, before agdb's own clean-up (the app uses it to
    stop sending interrupts, which must reach the script and nothing after it).
    """
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    from . import torch_shim

    wants_torch = torch_shim.imports_torch(path)
    if as_torch is None:
        as_torch = wants_torch
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    shim = torch_shim.install() if as_torch else None
    recorder = Recorder().attach()
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(recorder, stop, on_progress), daemon=True) if on_progress else None
    if ticker:
        ticker.start()
    error, error_text = None, ""
    try:
        sys.argv = [str(path), *args]
        sys.path.insert(0, str(path.parent.resolve()))
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            if on_script_end is not None:
                on_script_end()
    except SystemExit as e:
        if e.code not in (None, 0):
            error, error_text = e, f"the script exited with status {e.code}"
    except BaseException as e:  # noqa: BLE001 - the user's error is reported, the trace is kept
        error = e
        error_text = "".join(traceback.format_exception(type(e), e, _user_tb(e.__traceback__, path)))
    finally:
        stop.set()
        sys.argv, sys.path[:] = saved_argv, saved_path
        if shim is not None:
            torch_shim.uninstall(shim)
        trace = recorder.finish()
    note = REAL_TORCH_NOTE if wants_torch and not as_torch and len(trace) == 0 else ""
    return ScriptRun(trace, error, error_text, as_torch, note)


def interrupt(thread_ident: int, clear: bool = False) -> bool:
    """Raise KeyboardInterrupt in the thread running a script, which stops it at its next bytecode.

    run_recorded catches it like any error of the script, so what was recorded so far is kept. With
    `clear`, drop an interrupt sent but not yet raised instead.
    """
    exc = ctypes.py_object(KeyboardInterrupt) if not clear else None
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_ident), exc)
    return done == 1


def _tick(recorder: Recorder, stop: threading.Event, on_progress: Callable[[int], None]) -> None:
    while not stop.wait(0.2):
        on_progress(len(recorder.rows))


def _user_tb(tb: Any, script: Path) -> Any:
    """Drop agdb's own frames from the top of a script's traceback."""
    target = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    return tb
