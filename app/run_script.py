"""Run a user's script under the recorder, keeping the trace however the script ends.

NOTE [running the script in agdb's process]
The script runs in agdb's own process, on agdb's engine, so the Recorder sees every event as a plain method
call (no copying across a process boundary: a 1M-node backward makes 7M events) and the TUI can stop it
with an interrupt. What that costs is that the script can end the process itself. `sys.exit` raises, and
is caught like any error: the trace is kept and the script's status becomes agdb's. `os._exit` would end
agdb before it saves, so while the script runs `os._exit` is replaced: `record` saves the trace first and
then exits with the script's status (nothing of the script's runs after it, as with the real call); the
TUI, which must outlive the script, stops the script there instead (an `OsExitCalled` error). A forked
child's `os._exit` goes straight through. A crash of the interpreter itself (a segfault, SIGKILL) still
loses the recording; a child process would survive those, but then every event would have to cross a
pipe as it happens, for a failure that Python code cannot cause.

Never imports textual or rich.
"""
from __future__ import annotations

import io
import os
import runpy
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agdb.tracer import Recorder


class OsExitCalled(BaseException):
    """The script called os._exit(status) where agdb must not end: it is stopped there (TUI recording)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class ScriptRun:
    """What running a script produced: the trace, and the script's error if it raised or exited non-zero."""

    trace: Any
    error: BaseException | None
    error_text: str
    as_torch: bool = False  # whether `import torch` got agdb's engine
    note: str = ""  # what the user should know about an empty recording, and what to do
    exit_status: int = 0  # the status `python SCRIPT` would have ended with
    read_stdin: bool = False  # the script read its stdin, and was given none (no_stdin)
    output: str = ""  # what the script printed (stdout and stderr, interleaved), when captured


REAL_TORCH_NOTE = ("the script ran on real PyTorch without agdb's bridge, so nothing was recorded. Record real "
                   "PyTorch with --torch (or `agdb torch`), or run it on agdb's engine with --as-torch (the default "
                   "for a script that imports torch).")


def run_recorded(script: str, args: list[str], as_torch: bool | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 on_script_end: Callable[[], None] | None = None,
                 no_stdin: bool = False,
                 on_os_exit: Callable[[ScriptRun], int] | None = None,
                 capture_output: bool = False) -> ScriptRun:
    """Run `script` with `args` as `__main__`, recording the engine; the trace is kept if the script fails.

    `as_torch`: let the script's `import torch` get agdb's engine; None (the default) does so when the
    script's source imports torch; "bridge" runs real torch under the PyTorch bridge instead.

    `on_script_end` is called the moment the script stops, before agdb's own clean-up (the app uses it to
    stop sending interrupts, which must reach the script and nothing after it).

    `no_stdin`: give the script an empty stdin (the TUI owns the terminal); `read_stdin` says if it read.

    `capture_output`: keep what the script writes to stdout and stderr (the last MAX_OUTPUT characters) in
    `output` instead of the terminal, which the TUI owns.

    `on_os_exit`: called, from the script's thread, with the run so far when the script calls os._exit;
    it saves what it must and returns the status the process then ends with. Without it, the script is
    stopped with OsExitCalled.
    NOTE [running the script in agdb's process].
    """
    if as_torch in ("bridge", "bridge:single-threaded"):  # --torch: real PyTorch, recorded by the bridge
        from .torch_run import run_bridged  # (app/torch_run.py); agdb torch --single-threaded: the witness too
        return run_bridged(script, args, on_progress, on_script_end, no_stdin, on_os_exit,
                           single_threaded=as_torch == "bridge:single-threaded")
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    path = path.resolve()  # the script may chdir; its frames and tracebacks keep naming this file
    from . import torch_shim

    wants_torch = torch_shim.imports_torch(path)
    if as_torch is None:
        as_torch = wants_torch
    saved_argv, saved_path, saved_stdin, saved_exit = sys.argv[:], sys.path[:], sys.stdin, os._exit
    saved_out, saved_err = sys.stdout, sys.stderr
    stdin = _NoInput() if no_stdin else None
    output = _Output() if capture_output else None
    shim = torch_shim.install() if as_torch else None
    recorder = Recorder().attach()
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(recorder, stop, on_progress), daemon=True) if on_progress else None
    if ticker:
        ticker.start()
    state: dict[str, Any] = {}

    def restore() -> None:
        stop.set()
        sys.argv, sys.path[:], os._exit = saved_argv, saved_path, saved_exit
        if stdin is not None:
            sys.stdin = saved_stdin
        if output is not None:  # put back only what is still ours (the app may have swapped them since)
            if sys.stdout is output:
                sys.stdout = saved_out
            if sys.stderr is output:
                sys.stderr = saved_err
        if shim is not None:
            torch_shim.uninstall(shim)

    def finished(error: BaseException | None, error_text: str) -> ScriptRun:
        trace = recorder.finish()
        note = REAL_TORCH_NOTE if wants_torch and not as_torch and len(trace) == 0 else ""
        return ScriptRun(trace, error, error_text, as_torch, note, exit_status(error),
                         stdin is not None and stdin.was_read, output.text() if output is not None else "")

    os._exit = _os_exit_for(os.getpid(), saved_exit, on_os_exit, restore, finished, state)
    error, error_text = None, ""
    try:
        sys.argv = [script, *args]
        sys.path.insert(0, str(path.parent))
        if stdin is not None:
            sys.stdin = stdin
        if output is not None:
            sys.stdout = sys.stderr = output
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            if on_script_end is not None:
                on_script_end()
    except BaseException as e:  # noqa: BLE001 - the user's error is reported, the trace is kept
        error, error_text = script_error(e, path)
    finally:
        restore()
    return finished(error, error_text)


def script_error(e: BaseException, path: Path) -> tuple[BaseException | None, str]:
    """How a script's run that raised `e` ended: (None, "") for sys.exit(0), else the error and its report (for
    an exception, a traceback cut to the script's own frames)."""
    if isinstance(e, SystemExit):
        return (None, "") if e.code in (None, 0) else (e, _exit_text(e))
    if isinstance(e, OsExitCalled):
        return e, f"the script called os._exit({e.status}): agdb stopped it there"
    return e, "".join(traceback.format_exception(type(e), e, _user_tb(e.__traceback__, path)))


def syntax_error(script: str) -> str | None:
    """Python's report of the syntax error in `script` (its file, line, caret and message), or None when it
    compiles; raises OSError when it cannot be read. Checked before recording, so that a typo is the first thing
    the user reads rather than a failed recording."""
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte in the source
        return "".join(traceback.format_exception_only(type(e), e))
    return None


def exit_status(error: BaseException | None) -> int:
    """The status `python SCRIPT` ends with after `error`: sys.exit's code, os._exit's, 130 for Ctrl-C, else 1."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        if error.code is None:
            return 0
        return error.code if isinstance(error.code, int) else 1
    if isinstance(error, OsExitCalled):
        return error.status
    return 130 if isinstance(error, KeyboardInterrupt) else 1


def _exit_text(e: SystemExit) -> str:
    if isinstance(e.code, int):
        return f"the script exited with status {e.code}"
    return f"the script exited with status 1: {e.code}"  # sys.exit("message") prints it and exits 1


def _os_exit_for(pid: int, real_exit: Callable[[int], Any], on_os_exit: Callable[[ScriptRun], int] | None,
                 restore: Callable[[], None], finished: Callable[..., ScriptRun], state: dict) -> Callable[[int], Any]:
    """The os._exit the script sees while it runs (NOTE [running the script in agdb's process])."""
    def os_exit(status: int) -> Any:
        if os.getpid() != pid or state.get("exiting"):
            return real_exit(status)  # a forked child's exit, or agdb's own after saving
        if on_os_exit is None:
            raise OsExitCalled(status)
        state["exiting"] = True
        restore()
        error = OsExitCalled(status)
        final = 1
        try:
            final = on_os_exit(finished(error, f"the script called os._exit({status})"))
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            real_exit(final)

    return os_exit


class _NoInput(io.TextIOBase):
    """An empty stdin that remembers being read (input() on it raises EOFError, as on /dev/null)."""

    def __init__(self) -> None:
        super().__init__()
        self.was_read = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        self.was_read = True
        return ""

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        self.was_read = True
        return ""

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("agdb gives the script no stdin while the TUI owns the terminal")


MAX_OUTPUT = 1_000_000
"""Characters of a script's captured output kept (the last ones): a script printing in a loop must not fill
memory."""


class _Output(io.TextIOBase):
    """A stream that keeps what is written to it, up to the last MAX_OUTPUT characters (a lock: the script's
    threads may print at once)."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._size = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            if self._size > 2 * MAX_OUTPUT:
                kept = "".join(self._parts)[-MAX_OUTPUT:]
                self.dropped += self._size - len(kept)
                self._parts, self._size = [kept], len(kept)
        return len(text)

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        """What was written (its last MAX_OUTPUT characters, after a note of what was left out)."""
        with self._lock:
            text = "".join(self._parts)
            dropped = self.dropped + max(0, len(text) - MAX_OUTPUT)
            text = text[-MAX_OUTPUT:]
        return f"[… the first {dropped:,} characters are left out]\n{text}" if dropped else text


def _tick(recorder: Recorder, stop: threading.Event, on_progress: Callable[[int], None]) -> None:
    while not stop.wait(0.2):
        on_progress(recorder.builder.num_events)


def _user_tb(tb: Any, script: Path) -> Any:
    """Drop agdb's own frames from the top of a script's traceback."""
    target = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    return tb
