"""Run a script on real PyTorch under the bridge (`agdb torch`, `--torch`), in a thread with a large stack.

PyTorch frees a deep graph recursively: a 50k-deep graph whose nodes were touched from Python crashes the
main thread's 8 MiB stack, so the script runs in a thread of its own with `torch_bridge.BIG_STACK` (1 GiB of
address space; 1M-deep chains need it). The caller's thread waits for it and passes on an interrupt (the TUI's
Escape, Ctrl-C) to the script, so stopping a recording works as it does on agdb's engine
(NOTE [running the script in agdb's process] in run_script.py: the same rules for sys.exit and os._exit).

Never imports torch itself: the bridge does, when the script starts.
"""
from __future__ import annotations

import os
import runpy
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from agdb.tracer.recording.async_exc import interrupt
from agdb.tracer.sources import torch as torch_bridge

from .run_script import OsExitCalled, ScriptRun, _NoInput, _os_exit_for, exit_status, script_error


def run_bridged(script: str, args: list[str], on_progress: Callable[[int], None] | None = None,
                on_script_end: Callable[[], None] | None = None, no_stdin: bool = False,
                on_os_exit: Callable[[ScriptRun], int] | None = None, stack_size: int = torch_bridge.BIG_STACK,
                single_threaded: bool = False) -> ScriptRun:
    """Run `script` as `__main__` on real torch, recording it with the bridge; arguments as run_recorded's;
    `single_threaded`: the bridge's option of that name (tracer.sources.torch.record).

    Raises torch_bridge.TorchMissing (its message says how to install torch) and FileNotFoundError.
    """
    if not torch_bridge.available():
        raise torch_bridge.TorchMissing(torch_bridge.INSTALL_HINT)
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    path = path.resolve()
    ended = threading.Event()
    box: dict[str, Any] = {}

    def body() -> None:
        box["ident"] = threading.get_ident()
        try:
            box["run"] = _run_here(script, path, args, no_stdin, on_os_exit, on_progress, ended, single_threaded)
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = e
        finally:
            ended.set()

    old = threading.stack_size()
    threading.stack_size(stack_size)
    try:
        # Named MainThread, as under `python SCRIPT` (NOTE [the script's thread] in app/app.py): the trace and
        # `agdb culprits` name the thread, and the script may read threading.current_thread().name.
        thread = threading.Thread(target=body, name="MainThread", daemon=True)
        thread.start()
    finally:
        threading.stack_size(old)
    _wait(thread, ended, box, on_script_end)
    if "error" in box:
        raise box["error"]
    return box["run"]


def _wait(thread: threading.Thread, ended: threading.Event, box: dict, on_script_end: Callable[[], None] | None
          ) -> None:
    """Join the script's thread, passing any interrupt this thread gets on to it."""
    told = False
    while thread.is_alive():
        try:
            if ended.wait(0.1) and not told:
                told = True
                if on_script_end is not None:
                    on_script_end()
            thread.join(0.1)
        except KeyboardInterrupt:
            if not ended.is_set() and "ident" in box:
                interrupt(box["ident"])
    if not told and on_script_end is not None:
        on_script_end()


def _run_here(script: str, path: Path, args: list[str], no_stdin: bool,
              on_os_exit: Callable[[ScriptRun], int] | None, on_progress: Callable[[int], None] | None,
              ended: threading.Event, single_threaded: bool = False) -> ScriptRun:
    from agdb.tracer.sources.torch.bridge import Bridge

    saved_argv, saved_path, saved_stdin, saved_exit = sys.argv[:], sys.path[:], sys.stdin, os._exit
    stdin = _NoInput() if no_stdin else None
    bridge = Bridge(single_threaded=single_threaded).attach()
    stop = threading.Event()
    if on_progress is not None:
        threading.Thread(target=_tick, args=(bridge, stop, on_progress), daemon=True).start()
    state: dict[str, Any] = {}

    def restore() -> None:
        stop.set()
        sys.argv, sys.path[:], os._exit = saved_argv, saved_path, saved_exit
        if stdin is not None:
            sys.stdin = saved_stdin

    def finished(error: BaseException | None, error_text: str) -> ScriptRun:
        trace = bridge.finish()
        return ScriptRun(trace, error, error_text, False, "", exit_status(error), stdin is not None and stdin.was_read)

    os._exit = _os_exit_for(os.getpid(), saved_exit, on_os_exit, restore, finished, state)
    error, error_text = None, ""
    try:
        sys.argv = [script, *args]
        sys.path.insert(0, str(path.parent))
        if stdin is not None:
            sys.stdin = stdin
        try:
            runpy.run_path(str(path), run_name="__main__")  # its globals (and graphs) die here, on this stack
        finally:
            ended.set()
    except BaseException as e:  # noqa: BLE001 - the user's error is reported, the trace is kept
        error, error_text = script_error(e, path)
        if not isinstance(e, (SystemExit, OsExitCalled)):
            e.__traceback__ = None  # its frames hold the script's tensors: free them on this thread's stack
    finally:
        restore()
    return finished(error, error_text)


def _tick(bridge: Any, stop: threading.Event, on_progress: Callable[[int], None]) -> None:
    while not stop.wait(0.2):
        on_progress(bridge.b.num_events)
