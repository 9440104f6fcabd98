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

The script runs on the thread that calls `run_recorded`: for the commands, the main thread, so that signals,
`signal.signal` and the script's non-daemon threads behave as under `python` (NOTE [signals and the script] in
signals.py; NOTE [the main thread's stack] in main_stack.py says how real torch gets a big enough stack there).
Once its code returns, agdb waits for the non-daemon threads it started, as Python does before it exits, so that
their work is recorded too. The TUI, whose main thread Textual owns, runs it on a thread of its own, and does not
wait for the script's threads.

Never imports textual or rich.
"""
from __future__ import annotations

import io
import os
import runpy
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from agdb.tracer import make_source
from agdb.tracer.recording.async_exc import interrupt
from agdb.tracer.sources import torch as torch_source
from agdb.tracer.sources.source import SourceName

from . import signals
from .run_progress import FREEZING, RECONSTRUCTING, RUNNING, RunProgress
from .signals import Terminated, stopped_by

TorchImport = Literal["auto", "engine", "torch"]


@dataclass(frozen=True)
class ScriptSource:
    """Which trace source records a script, and how: agdb's engine (`agdb record`) or real PyTorch under the bridge
    (`--torch`, `agdb torch`)."""

    name: SourceName = "engine"
    torch_import: TorchImport = "auto"
    """On the engine: what the script's `import torch` gets. "engine": agdb's engine (--as-torch); "torch": real
    torch, unrecorded (--real-torch); "auto": the engine when the script's source imports torch."""
    single_threaded: bool = False
    """On real torch: backward calls with autograd multithreading disabled, torch's own order as a witness
    (`agdb torch --single-threaded`; the bridge's option of that name)."""

    def flags(self) -> list[str]:
        """The command-line flags that choose this source (`agdb serve` passes them on to each tab's agdb)."""
        if self.name == "torch":
            return ["--torch"]
        return {"auto": [], "engine": ["--as-torch"], "torch": ["--real-torch"]}[self.torch_import]


DEFAULT_SOURCE = ScriptSource()
"""agdb's engine, giving the script's `import torch` the engine when its source imports torch."""


SaveInPlace = Callable[[BaseException, dict], "int | None"]
"""`save(error, meta)`: the run finished as ended by `error` and saved, its status; None when it was being saved
already (app/blocked.py calls it from its watcher thread)."""


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
    note: str = ""  # what the user should know about an empty recording, and what to do
    exit_status: int = 0  # the status `python SCRIPT` would have ended with
    read_stdin: bool = False  # the script read its stdin, and was given none (no_stdin)
    output: str = ""  # what the script printed (stdout and stderr, interleaved), when captured
    scope: dict | None = None  # the script's globals, when asked for (keep_globals) and its code returned


REAL_TORCH_NOTE = ("the script ran on real PyTorch without agdb's bridge, so nothing was recorded. Record real "
                   "PyTorch with --torch (or `agdb torch`), or run it on agdb's engine with --as-torch (the default "
                   "for a script that imports torch).")


def run_recorded(script: str, args: list[str], source: ScriptSource = DEFAULT_SOURCE,
                 progress: RunProgress | None = None,
                 on_script_end: Callable[[], None] | None = None,
                 no_stdin: bool = False,
                 on_os_exit: Callable[[ScriptRun], int] | None = None,
                 capture_output: bool = False,
                 on_script_start: Callable[[], None] | None = None,
                 on_save_ready: Callable[[SaveInPlace], None] | None = None,
                 keep_globals: bool = False) -> ScriptRun:
    """Run `script` with `args` as `__main__`, recorded by `source`; the trace is kept if the script fails.

    `on_script_start` is called just before the script's code runs, and what it raises counts as the script's
    (signals.ScriptSignals raises a signal held until then); `on_script_end` is called the moment the script stops
    (its code returned and the non-daemon threads it started ended), before agdb's own clean-up (the app uses it
    to stop sending interrupts, which must reach the script and nothing after it).

    `progress`: where the run writes its phase and which a display polls for the events so far (NOTE [progress by
    polling] in run_progress.py).

    `no_stdin`: give the script an empty stdin (the TUI owns the terminal); `read_stdin` says if it read.

    `capture_output`: keep what the script writes to stdout and stderr (the last MAX_OUTPUT characters) in
    `output` instead of the terminal, which the TUI owns.

    `on_os_exit`: called, from the script's thread, with the run so far when the script calls os._exit;
    it saves what it must and returns the status the process then ends with. Without it, the script is
    stopped with OsExitCalled.

    `on_save_ready`: with `on_os_exit`, called before the script runs with `save(error, meta)`, which another thread
    may call while the script's thread is blocked (NOTE [a stop signal while blocked in C++] in blocked.py): it
    finishes the run as ended by `error`, adds `meta` to the trace and passes it to `on_os_exit`, once.
    NOTE [running the script in agdb's process].

    `keep_globals`: hand back the script's globals in `scope` (`agdb fx --torch -o` reads its `agdb_fx` mark there);
    otherwise they are dropped on the script's thread as soon as its code returns (on real torch, with them go its
    graphs, which need the big stack to be freed).

    Raises FileNotFoundError, and TorchMissing (its message says how to install torch) for real torch without it.
    """
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    path = path.resolve()  # the script may chdir; its frames and tracebacks keep naming this file
    run = _Run(script, path, args, source, progress, no_stdin, on_os_exit, capture_output, on_script_start,
               on_save_ready, keep_globals)
    if source.name == "torch":
        if not torch_source.available():
            raise torch_source.TorchMissing(torch_source.INSTALL_HINT)
        if threading.current_thread() is not threading.main_thread():
            return _on_big_stack(run, on_script_end)  # the TUI's script thread
    return run(on_script_end)


class _Run:
    """One run of a script under a trace source, on the calling thread."""

    def __init__(self, script: str, path: Path, args: list[str], source: ScriptSource,
                 progress: RunProgress | None, no_stdin: bool,
                 on_os_exit: Callable[[ScriptRun], int] | None, capture_output: bool,
                 on_script_start: Callable[[], None] | None = None,
                 on_save_ready: Callable[[SaveInPlace], None] | None = None, keep_globals: bool = False) -> None:
        self.script, self.path, self.args, self.source = script, path, args, source
        self.on_save_ready, self.keep_globals = on_save_ready, keep_globals
        self.progress = progress if progress is not None else RunProgress()
        self.no_stdin, self.on_os_exit, self.capture_output = no_stdin, on_os_exit, capture_output
        self.on_script_start = on_script_start

    def __call__(self, on_script_end: Callable[[], None] | None) -> ScriptRun:
        script, path, source = self.script, self.path, self.source
        on_engine = source.name == "engine"
        if on_engine:  # the shim imports agdb's engine: 0.1 s that a run on real torch does not need
            from . import torch_shim
        wants_torch = on_engine and torch_shim.imports_torch(path)
        as_torch = on_engine and (wants_torch if source.torch_import == "auto" else source.torch_import == "engine")
        saved_argv, saved_path, saved_stdin, saved_exit = sys.argv[:], sys.path[:], sys.stdin, os._exit
        saved_out, saved_err = sys.stdout, sys.stderr
        stdin = _NoInput() if self.no_stdin else None
        output = _Output() if self.capture_output else None
        shim = torch_shim.install() if as_torch else None
        options = {"single_threaded": True} if source.single_threaded else {}
        if not on_engine and signals.SAVE_WHEN_BLOCKED:  # a rank of `agdb torch --nproc` (NOTE [a stop signal while
            options["defer"] = False  # blocked in C++]): each backward call written as it returns, so that a rank
            # saved by the watcher while its script thread is blocked holds every call it finished
        progress = self.progress
        if not on_engine:
            progress.enter("loading torch")  # the bridge imports it: seconds, before the script's first line
        recording = make_source(source.name, **options).attach()
        progress.watch(recording)
        state: dict[str, Any] = {}

        def restore() -> None:
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

        def finished(error: BaseException | None, error_text: str, scope: dict | None = None) -> ScriptRun:
            # the bridge models what torch hides before it freezes (NOTE [observe now, reconstruct later])
            progress.enter(FREEZING if on_engine else RECONSTRUCTING)
            trace = recording.finish(lambda done, total: progress.advance(done, total) if done else
                                     progress.enter(FREEZING, total))
            progress.settle(len(trace))
            signum = stopped_by(error)
            if signum is not None:  # the script did not end of itself: the trace is only what it did until then
                trace.meta["partial"] = signal.Signals(signum).name
            note = REAL_TORCH_NOTE if wants_torch and not as_torch and len(trace) == 0 else ""
            return ScriptRun(trace, error, error_text, note, exit_status(error),
                             stdin is not None and stdin.was_read, output.text() if output is not None else "", scope)

        os._exit = _os_exit_for(os.getpid(), saved_exit, self.on_os_exit, restore, finished, state)
        if self.on_save_ready is not None and self.on_os_exit is not None:
            self.on_save_ready(_save_in_place(self.on_os_exit, finished, state))
        error, error_text, scope = None, "", None
        try:
            sys.argv = [script, *self.args]
            sys.path.insert(0, str(path.parent))
            if stdin is not None:
                sys.stdin = stdin
            if output is not None:
                sys.stdout = sys.stderr = output
            try:
                progress.enter(RUNNING)
                error, scope = _run_main(path, self.on_script_start, self.keep_globals)
            finally:
                if on_script_end is not None:
                    on_script_end()
        except BaseException as e:  # noqa: BLE001 - raised before the script ran, or by on_script_end
            error = e
        finally:
            restore()
        if error is not None:
            error, error_text = script_error(error, path)
            if error is not None and not on_engine and not isinstance(error, (SystemExit, OsExitCalled)):
                error.__traceback__ = None  # its frames hold the script's tensors: free them on this thread's stack
        return finished(error, error_text, scope)


def _run_main(path: Path, on_start: Callable[[], None] | None,
              keep_globals: bool = False) -> tuple[BaseException | None, dict | None]:
    """Run the script as `__main__`, then, on the main thread, wait for the non-daemon threads it started, as Python
    does before it exits (not after a SIGTERM or os._exit, which end Python at once); returns what it raised, and
    its globals when `keep_globals` and its code returned."""
    before = set(threading.enumerate())
    error: BaseException | None = None
    scope = None
    try:
        if on_start is not None:
            on_start()
        scope = runpy.run_path(str(path), run_name="__main__")
        if not keep_globals:
            scope = None  # on real torch its graphs die here, on a big stack
    except BaseException as e:  # noqa: BLE001 - the user's error is reported, the trace is kept
        error = e
    if isinstance(error, (Terminated, OsExitCalled)) or threading.current_thread() is not threading.main_thread():
        # not in the TUI either: there the script shares the process with Textual's own threads (its executor's
        # idle workers among them, which never end), so a thread left running by the script outlives its recording
        return error, scope
    try:
        _join_new_threads(before)
    except BaseException as e:  # noqa: BLE001 - a signal while waiting: it ends the run, as it ends Python's wait
        error = error or e
    return error, scope


def _join_new_threads(before: set[threading.Thread]) -> None:
    """Join the non-daemon threads started since `before` was taken, and those they start, until none is left; the
    executors those threads serve are shut down first, as Python's exit does (NOTE [the script's pools])."""
    me = threading.current_thread()
    while True:
        left = [t for t in threading.enumerate() if t not in before and t is not me and not t.daemon and t.is_alive()]
        if not left:
            return
        for executor in _pools_served(left):
            executor.shutdown(wait=False)
        for thread in left:
            thread.join()


def _pools_served(threads: list[threading.Thread]) -> list:
    """The concurrent.futures executors that `threads` work for: a ThreadPoolExecutor's workers, a
    ProcessPoolExecutor's manager thread.

    NOTE [the script's pools]
    An idle worker of a ThreadPoolExecutor (or a ProcessPoolExecutor's manager thread) is a non-daemon thread that
    waits for work until its executor is shut down or collected. Python's exit does not wait for it: before joining
    the non-daemon threads, it runs the callbacks concurrent.futures registered with threading (its `_python_exit`),
    which tell every executor's threads to stop once the work queued is done. agdb, waiting for the script's threads
    while the process goes on, must do the same for the executors the script started: a pool kept alive past the
    script's end (torch.compile's inductor keeps its compile workers in a module-level cache) would otherwise keep
    `agdb torch` and `agdb record` waiting forever after the script finished. `shutdown(wait=False)` lets the work
    already queued run, as the exit does, and touches only those executors, not the process-wide flag the exit
    sets. The executor is found through the thread's own attributes (private to concurrent.futures, the same in
    Python 3.11 to 3.13); a thread that does not have them is joined as it is.
    """
    workers = sys.modules.get("concurrent.futures.thread")
    worker = getattr(workers, "_worker", None)
    found: dict[int, Any] = {}
    for thread in threads:
        ref = getattr(thread, "executor_reference", None)  # a ProcessPoolExecutor's manager thread
        if ref is None and worker is not None and getattr(thread, "_target", None) is worker:
            args = getattr(thread, "_args", ())
            ref = args[0] if args else None
        executor = ref() if callable(ref) else None
        if executor is not None and callable(getattr(executor, "shutdown", None)):
            found[id(executor)] = executor
    return list(found.values())


def _on_big_stack(run: _Run, on_script_end: Callable[[], None] | None) -> ScriptRun:
    """Run a real-torch script in a thread of its own with a large stack, passing on interrupts.

    PyTorch frees a deep graph recursively: a 50k-deep graph whose nodes were touched from Python crashes the
    main thread's 8 MiB stack, so the script runs with `torch_source.BIG_STACK` (1 GiB of address space; 1M-deep
    chains need it). This thread waits for it and passes on an interrupt (the TUI's Escape, Ctrl-C) to the script,
    so stopping a recording works as it does on agdb's engine.
    """
    ended = threading.Event()
    ident: list[int] = []

    def body() -> ScriptRun:
        ident.append(threading.get_ident())
        try:
            return run(ended.set)
        finally:
            ended.set()

    # Named MainThread, as under `python SCRIPT` (NOTE [the script's thread] in app/app.py): the trace and
    # `agdb culprits` name the thread, and the script may read threading.current_thread().name.
    return torch_source.run_with_big_stack(body, name="MainThread", daemon=True,
                                           wait=lambda thread: _wait(thread, ended, ident, on_script_end))


def _wait(thread: threading.Thread, ended: threading.Event, ident: list[int],
          on_script_end: Callable[[], None] | None) -> None:
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
            if not ended.is_set() and ident:
                interrupt(ident[0])
    if not told and on_script_end is not None:
        on_script_end()


def script_error(e: BaseException, path: Path) -> tuple[BaseException | None, str]:
    """How a script's run that raised `e` ended: (None, "") for sys.exit(0), else the error and its report (for
    an exception, a traceback cut to the script's own frames)."""
    if isinstance(e, SystemExit):
        return (None, "") if e.code in (None, 0) else (e, _exit_text(e))
    if isinstance(e, OsExitCalled):
        return e, f"the script called os._exit({e.status}): agdb stopped it there"
    if isinstance(e, Terminated):
        return e, f"the script was stopped by {e}"
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
    """The status `python SCRIPT` ends with after `error`: sys.exit's code, os._exit's, minus the signal when one
    stopped it (as subprocess reports a process killed by a signal: Python ends an uncaught KeyboardInterrupt by
    SIGINT), else 1."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        if error.code is None:
            return 0
        return error.code if isinstance(error.code, int) else 1
    if isinstance(error, OsExitCalled):
        return error.status
    signum = stopped_by(error)
    return 1 if signum is None else -signum


def _exit_text(e: SystemExit) -> str:
    if isinstance(e.code, int):
        return f"the script exited with status {e.code}"
    return f"the script exited with status 1: {e.code}"  # sys.exit("message") prints it and exits 1


def os_exit_stopping_here(real_exit: Callable[[int], Any]) -> Callable[[int], Any]:
    """An os._exit that stops the script with OsExitCalled in this process (agdb must outlive it), and ends a
    process the script forked as the real one does."""
    pid = os.getpid()

    def os_exit(status: int) -> Any:
        if os.getpid() != pid:
            return real_exit(status)
        raise OsExitCalled(status)

    return os_exit


def _os_exit_for(pid: int, real_exit: Callable[[int], Any], on_os_exit: Callable[[ScriptRun], int] | None,
                 restore: Callable[[], None], finished: Callable[..., ScriptRun], state: dict) -> Callable[[int], Any]:
    """The os._exit the script sees while it runs (NOTE [running the script in agdb's process])."""
    if on_os_exit is None:
        return os_exit_stopping_here(real_exit)

    def os_exit(status: int) -> Any:
        if os.getpid() != pid or state.get("exiting"):
            return real_exit(status)  # a forked child's exit, or agdb's own after saving
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


def _save_in_place(on_os_exit: Callable[[ScriptRun], int], finished: Callable[..., ScriptRun],
                   state: dict) -> SaveInPlace:
    """`run_recorded`'s `save(error, meta)` for on_save_ready: the run finished as ended by `error`, once (None: it
    was being saved already)."""

    def save(error: BaseException, meta: dict) -> int | None:
        if state.get("exiting"):
            return None  # os._exit is saving already, and ends the process once it has
        state["exiting"] = True
        run = finished(error, str(error))
        run.trace.meta.update(meta)
        return on_os_exit(run)

    return save


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


def _user_tb(tb: Any, script: Path) -> Any:
    """Drop agdb's own frames from the top of a script's traceback."""
    target = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    return tb
