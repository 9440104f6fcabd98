"""What the agdb commands share: one-line failures on stderr, checking `-o` and a script's syntax before running it,
recording a script and saying how it ended, saving its run, loading a trace."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.markup import escape

from agdb.tracer.store.atomic import is_read_only
from agdb.tracer.store.trace import Trace
from agdb.tracer.store.tracefile import load, save

from .progress_line import ProgressLine
from .run_progress import SAVING, RunProgress
from .run_script import OsExitCalled, ScriptRun, ScriptSource, run_recorded, syntax_error
from .signals import ScriptSignals, Terminated
from .tracebacks import user_frames

err = Console(stderr=True, highlight=False)
"""agdb's notes and progress, on stderr (stdout carries what a command prints)."""


def fail(message: str) -> int:
    """One plain line on stderr: no markup (paths may hold brackets), no wrapping; returns 1, the status a command
    that failed exits with."""
    sys.stderr.write(f"agdb: {message}\n")
    return 1


def record_script(script: str, script_args: list[str], source: ScriptSource, signals: ScriptSignals,
                  on_os_exit: Callable[[ScriptRun], int] | None = None, keep_globals: bool = False) -> ScriptRun:
    """Run and record `script`, telling how it ended; `on_os_exit(run)` saves and exits if it calls os._exit;
    with `keep_globals`, the run's `scope` holds the script's globals (run_script.run_recorded).

    `signals` (the command's, from main) is armed here and stays armed until the command ends, so that a signal
    stops the script and one after it waits for the trace to be saved (NOTE [signals and the script]). On a terminal,
    stderr shows the phase, the events so far and the time elapsed (progress_line.py)."""
    signals.arm()
    progress = RunProgress()
    with ProgressLine(progress, err) as line:
        def os_exit(run: ScriptRun) -> int:
            line.close()
            report(run)
            return on_os_exit(run)

        run = run_recorded(script, script_args, source, progress=progress,
                           on_os_exit=os_exit if on_os_exit is not None else None,
                           on_script_start=signals.script_started, on_script_end=signals.script_ended,
                           on_save_ready=(None if signals.watcher is None else
                                          lambda save: setattr(signals.watcher, "save", save)),
                           keep_globals=keep_globals)
    report(run)
    return run


def report(run: ScriptRun) -> None:
    """Say on stderr how the script ended, when it did not end well, and why nothing was recorded."""
    if isinstance(run.error, KeyboardInterrupt):
        fail(f"interrupted: kept {len(run.trace):,} events")
    elif isinstance(run.error, Terminated):
        fail(f"{run.error}: kept {len(run.trace):,} events")
    elif isinstance(run.error, (SystemExit, OsExitCalled)):
        fail(f"{run.error_text} (what it recorded is kept)")
    elif run.error is not None:
        text = user_frames(run.error_text)  # the engine's or the bridge's frames say nothing about the script
        sys.stderr.write(f"agdb: the script raised (the trace up to that point is kept):\n{text}\n")
    if run.note:
        fail(run.note)


def output_file(text: str) -> Path | None:
    """`-o`'s file as an absolute path, checked before the script runs (the script may chdir or fail late);
    None after saying why it cannot be written."""
    path = Path(os.path.abspath(text))  # not resolve(): a symlink at -o stays the file named
    if path.is_dir():
        fail(f"-o {text} is a directory: name a file, such as {Path(text) / 'trace.agdb'}")
    elif not path.parent.is_dir():
        fail(f"-o {text}: the directory {path.parent} does not exist")
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        fail(f"-o {text}: cannot write in {path.parent}")
    elif path.exists() and not path.is_file():
        fail(f"-o {text} is not a regular file")
    elif is_read_only(path):
        fail(f"-o {text} is read-only, so agdb leaves it as it is: make it writable or remove it first")
    else:
        return path
    return None


def compiles(script: str) -> bool:
    """Whether `script` exists and compiles; if not, says why (Python's own SyntaxError report) first."""
    report = syntax_error(script)  # OSError (no such script) goes to main's handler
    if report is not None and _is_trace(script):
        fail(f"{script} is a saved trace, not a script: open it with `agdb open {script}`")
    elif report is not None:
        sys.stderr.write(f"agdb: {script} has a syntax error, so it was not run:\n{report}")
    return report is None


def _is_trace(path: str) -> bool:
    """Whether the file starts as agdb's trace files do (a user passing one where a script belongs)."""
    from agdb.tracer.store.tracefile import MAGIC

    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def save_run(run: ScriptRun, output: Path, shown: str) -> int:
    """Save a run's trace to `output` unless it is empty and would replace a file or hide a failure; returns
    the status agdb ends with: the script's own, or 1 when agdb failed."""
    if run.note:
        return 1  # nothing recorded, and said why: no empty file
    if len(run.trace) == 0 and (run.error is not None or output.exists()):
        kept = " (the file there is left as it was)" if output.exists() else ""
        fail(f"nothing was recorded, so {shown} was not written{kept}")
        return run.exit_status or 1
    progress = RunProgress(SAVING)
    progress.settle(len(run.trace))
    with ProgressLine(progress, err):
        save(run.trace, output, progress.advance)
    sys.stderr.write(f"wrote {shown}: {len(run.trace):,} events, {run.trace.num_nodes:,} nodes\n")
    return run.exit_status


def load_trace(path: str) -> Trace:
    with err.status(escape(f"loading {path}…")):
        return load(path)
