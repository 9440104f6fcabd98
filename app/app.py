"""AgdbApp: opens a trace, a saved file or a script to record, and steps through it."""
from __future__ import annotations

import asyncio
import signal
import threading
from functools import partial
from typing import TYPE_CHECKING, Any, Iterable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.notifications import Notify
from textual.screen import Screen
from textual.widgets import ProgressBar, Static
from textual.worker import get_current_worker

from agdb.tracer.store.printable import printable

from .messages import TraceFailed, TraceLoaded, TraceProgress
from .progress_line import TICK_SECONDS, progress_text
from .run_progress import RunProgress
from .run_script import DEFAULT_SOURCE, ScriptSource
from .screens.help import keys_text
from .screens.step import StepScreen
from .signals import STOPPING

if TYPE_CHECKING:
    from .export import ExportRule

QUIT_WAIT_TRIES = 50
"""Times quitting repeats the interrupt of a recording script (20 ms apart) before it exits anyway."""
NO_STDIN_NOTE = ("The script read its standard input, which it does not get under the TUI (the TUI reads the "
                 "keyboard). Record it with `agdb record SCRIPT -o FILE`, where it can read input, then open the "
                 "file with `agdb open FILE`.")

MAX_TOASTS = 2
"""Notes on screen at once; an older one goes when a newer comes (a pile of them covered the inspector)."""
KEPT_TOAST_S = 3600
"""A note with a longer timeout is kept until clicked away (the script's error), whatever comes after it."""


class AgdbApp(App[None]):
    """The agdb TUI. Give it a Trace, a path to a .agdb file, or a script to record."""

    CSS_PATH = "agdb.tcss"
    TITLE = "agdb"
    BINDINGS = [Binding("escape", "cancel", "Cancel loading or recording", show=False),
                Binding("q", "quit", "Quit", show=False),
                Binding("o", "show_output", "The script's output", show=False),
                # Textual's ctrl+c only asks to press ctrl+q: here it quits, like q and ctrl+q.
                Binding("ctrl+c", "quit", "Quit", show=False, priority=True)]

    def __init__(self, trace: Any = None, path: str | None = None, script: str | None = None,
                 script_args: list[str] | None = None, source: ScriptSource = DEFAULT_SOURCE, title: str = "",
                 source_files: Iterable[str] = (), export_rule: ExportRule | None = None) -> None:
        super().__init__()
        self.trace, self.path, self.script = trace, path, script
        self.script_args, self.source, self.title_text = script_args or [], source, title  # source: records script
        self.source_files = tuple(source_files) + ((script,) if script else ())
        """Files the user named on the command line: the only ones the source view may open, and only for a
        trace that stores no source of its own (recorded before format version 3)."""
        self.export_rule = export_rule
        """Where the export key may write (None: anywhere); `agdb serve` gives its tabs a confining rule."""
        self.is_closed_when_empty = False
        """Whether a script whose run recorded nothing closes the TUI at once, for the CLI to say why (`agdb tui`);
        else (`agdb serve`'s tabs) the screen says it."""
        self.failure: str | None = None
        """Why the trace could not be opened, once it could not: the CLI prints it and exits non-zero."""
        self.script_output = ""
        """What the recorded script printed (the TUI owns the terminal, so it is kept and shown on `o`)."""
        self._script_thread: int | None = None  # the thread running the user's script, while it runs
        self._cancelled = False
        self._cancel_lock = threading.Lock()
        self._interrupt_timer: Any = None
        self._script_worker: threading.Thread | None = None
        self._quitting = False  # set by action_quit: a trace that arrives now is not shown
        self._quit_on_signals = False
        self._progress: RunProgress | None = None  # the recording's, polled while the loading screen shows it
        self._progress_timer: Any = None
        self.stopped_by: int | None = None
        """The signal that quit the app, when one did (`quit_on_signals`)."""

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="status")
        yield ProgressBar(id="progress", show_eta=False, classes="-hidden")

    def quit_on_signals(self) -> None:
        """Let SIGINT, SIGTERM and SIGHUP (a closed terminal, `timeout`, `kill`) quit the app as `q` does, so that the
        terminal is left as it was found, and record which one did in `stopped_by` (the CLI then ends by it). Only
        for signals still at their default disposition; call before running the app (an app under test leaves the
        process's signals alone)."""
        self._quit_on_signals = True

    def _arm_signals(self) -> None:
        loop = asyncio.get_running_loop()  # its handlers go when the loop closes, as the app ends
        for signum in STOPPING:
            handler = signal.getsignal(signum)
            # asyncio.run's own SIGINT handler (it cancels the app's task, and agdb would exit 0) counts as the default
            runner = getattr(getattr(handler, "func", handler), "__self__", None)  # a partial of Runner._on_sigint
            if handler in (signal.SIG_DFL, signal.default_int_handler) or isinstance(runner, asyncio.Runner):
                loop.add_signal_handler(signum, self._stop_by, signum)

    def _stop_by(self, signum: int) -> None:
        self.stopped_by = self.stopped_by or signum
        self.call_next(self.action_quit)

    def on_mount(self) -> None:
        if self._quit_on_signals:
            self._arm_signals()
        if self.trace is not None:
            self.post_message(TraceLoaded(self.trace, self.title_text or "trace"))
        elif self.path is not None:
            self._load(self.path)
        elif self.script is not None:
            self._record(self.script)
        else:
            self.post_message(TraceFailed("nothing to open: give a trace, a .agdb file or a script"))

    def on_notify(self, event: Notify) -> None:
        """A new note (App._on_notify shows it): keep only the MAX_TOASTS newest, and every note kept until
        clicked away."""
        self._notifications.add(event.notification)  # idempotent: whether Textual's handler ran first or not
        passing = [n for n in self._notifications if n.timeout < KEPT_TOAST_S]
        for old in passing[:-MAX_TOASTS]:
            self._unnotify(old, refresh=False)
        if len(passing) > MAX_TOASTS:
            self._refresh_notifications()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers every action of the step screen, with its key."""
        yield from super().get_system_commands(screen)
        if self.script is not None:
            yield SystemCommand("The script's output", "key: o (what the recorded script printed)",
                                self.action_show_output)
        if isinstance(screen, StepScreen):
            for binding in screen.BINDINGS:
                if binding.action.startswith("app."):
                    continue
                yield SystemCommand(binding.tooltip or binding.description, f"key: {keys_text(binding)}",
                                    partial(screen.run_action, binding.action))

    @work(thread=True, exclusive=True, group="trace", exit_on_error=False)
    def _load(self, path: str) -> None:
        from agdb.tracer.store.tracefile import TraceFormatError, load

        self.post_message(TraceProgress(f"loading {path}… (Escape cancels)"))
        try:
            trace = load(path)
        except (TraceFormatError, OSError) as e:
            self.post_message(TraceFailed(str(e)))
            return
        except Exception as e:  # noqa: BLE001 - a bug, not a bad file: still said on screen, never "loading…" forever
            self.post_message(TraceFailed(f"{path}: agdb failed reading it ({type(e).__name__}: {e})"))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(TraceLoaded(trace, path))

    def _record(self, script: str) -> None:
        # NOTE [the script's thread]: not a Textual thread worker. Those run in asyncio's default executor,
        # whose threads are joined when the app's loop closes, so a script that never ends (or waits on
        # something) would keep agdb from quitting. A daemon thread is left behind on quit instead.
        # Named MainThread, as the script's thread is under `python SCRIPT` and `agdb record`: the trace names
        # the thread (`cpu (MainThread)`) and the script may read threading.current_thread().name.
        thread = self._script_worker = threading.Thread(target=self._record_in_thread, args=(script,),
                                                        name="MainThread", daemon=True)
        # NOTE [progress by polling] in run_progress.py: a timer of this loop reads it, the script is never slowed
        self._progress = RunProgress()
        self.query_one("#progress", ProgressBar).remove_class("-hidden")
        self._show_progress()
        self._progress_timer = self.set_interval(TICK_SECONDS, self._show_progress)
        thread.start()

    def _show_progress(self) -> None:
        """The loading screen's line for a recording: the phase, the events so far, the time elapsed, and its bar
        (pulsing while the script runs, filling while agdb freezes the trace)."""
        progress = self._progress
        if progress is None or self._cancelled or isinstance(self.screen, StepScreen):
            return
        self.query_one("#status", Static).update(
            Text(f"recording {self.script}… {progress.events:,} events\n{progress_text(progress, counting=False)}"
                 "\n\n(Escape stops it, q quits)"))  # it names a path: not markup
        self.query_one("#progress", ProgressBar).update(total=progress.total or None, progress=progress.done)

    def _stop_progress(self) -> None:
        if self._progress_timer is not None:
            self._progress_timer.stop()
            self._progress_timer = None
        self._progress = None
        self.query_one("#progress", ProgressBar).add_class("-hidden")

    def _record_in_thread(self, script: str) -> None:
        try:
            self._record_script(script)
        except KeyboardInterrupt:  # a cancel that landed outside the script (before it ran, or just after)
            self.post_message(TraceFailed("the recording was cancelled"))

    def _record_script(self, script: str) -> None:
        from agdb.tracer.recording.async_exc import drop_interrupt

        from .run_script import run_recorded

        # The lock orders this against action_cancel: a cancel either comes first and the script never
        # starts, or it finds the thread and interrupts it.
        with self._cancel_lock:
            if self._cancelled:
                self.post_message(TraceFailed("cancelled before the script started"))
                return
            self._script_thread = threading.get_ident()
        def script_ended() -> None:
            with self._cancel_lock:
                self._script_thread = None
                drop_interrupt()  # an interrupt sent as the script ended (NOTE [the async-exception flag])

        try:
            # The TUI owns the terminal: the script gets an empty stdin (input() raises EOFError at once)
            # rather than racing the TUI for the keys.
            run = run_recorded(script, self.script_args, self.source, progress=self._progress,
                               on_script_end=script_ended, no_stdin=True, capture_output=True)
        except OSError as e:
            self.post_message(TraceFailed(str(e)))
            return
        finally:
            script_ended()
        self.script_output = run.output
        notes = (run.error_text, run.note, NO_STDIN_NOTE if run.read_stdin else "")
        error = "\n\n".join(text.strip("\n") for text in notes if text)
        if self._cancelled:
            error = f"recording cancelled: showing the {len(run.trace):,} events recorded until then"
        self.post_message(TraceLoaded(run.trace, script, error))

    async def action_quit(self) -> None:
        """Quit at once, whatever is running: a script being recorded is interrupted and left behind. The status
        is non-zero when the trace could not be opened."""
        self._quitting = True
        self._stop_script()
        # An interrupt that lands in a destructor is dropped by Python (NOTE in action_cancel): repeat it until
        # the script has stopped, for up to a second, so that a script never runs on behind the exit.
        for _ in range(QUIT_WAIT_TRIES):
            if self._script_worker is None or not self._script_worker.is_alive():
                break
            await asyncio.sleep(0.02)
            self._interrupt_script()
        self.exit(return_code=1 if self.failure else 0)

    def _stop_script(self) -> None:
        from agdb.tracer.recording.async_exc import interrupt

        with self._cancel_lock:
            self._cancelled = True
            if self._script_thread is not None:
                interrupt(self._script_thread)

    def action_cancel(self) -> None:
        """Stop a recording (keeping what it recorded) or a load; does nothing once a trace is open."""
        if isinstance(self.screen, StepScreen) or self._cancelled:
            return
        with self._cancel_lock:
            self._cancelled = True
            thread = self._script_thread
        if thread is not None:
            self._interrupt_script()
            # An interrupt that lands in a destructor or a gc callback is dropped by Python ("Exception
            # ignored in ..."), so it is repeated until the script's thread has stopped.
            self._interrupt_timer = self.set_interval(0.2, self._interrupt_script)
            self.query_one("#status", Static).update("cancelling the recording…")
        else:
            self.workers.cancel_group(self, "trace")
            self.query_one("#status", Static).update("cancelled\n\npress q to quit")

    def _interrupt_script(self) -> None:
        from agdb.tracer.recording.async_exc import interrupt

        with self._cancel_lock:
            thread = self._script_thread
            if thread is not None:
                interrupt(thread)
            elif self._interrupt_timer is not None:
                self._interrupt_timer.stop()

    def action_show_output(self) -> None:
        """Show what the recorded script printed (for a saved trace there is nothing to show)."""
        from .screens.output import OutputScreen

        if self.script is None:
            self.notify("only a script recorded here (agdb tui SCRIPT) has output to show", timeout=4)
        elif not isinstance(self.screen, OutputScreen):
            self.push_screen(OutputScreen(self.script_output, self.script))

    @on(TraceProgress)
    def _progress(self, message: TraceProgress) -> None:
        self.query_one("#status", Static).update(Text(message.text))  # it names a path: not markup

    @on(TraceLoaded)
    def _loaded(self, message: TraceLoaded) -> None:
        self._stop_progress()
        if self._quitting:
            return
        if len(message.trace) == 0 and self.is_closed_when_empty:
            self.failure = " ".join(printable(f"nothing was recorded: {message.title} made no backward node. "
                                              f"{message.script_error}").split())
            self.exit(return_code=1)
            return
        if len(message.trace) == 0:
            self._failed(TraceFailed(f"{message.title}: the trace holds no events"
                                     + (f"\n\n{message.script_error}" if message.script_error else "")))
            return
        cut = message.trace.meta.get("partial")
        cut_text = f" (cut short by {printable(cut)})" if isinstance(cut, str) else ""
        count = len(message.trace)
        title = (f"agdb · {printable(message.title)} · {count:,} event{'' if count == 1 else 's'}{cut_text}"
                 " · ? for help")
        # for_display: node names, files and source lines from a trace are shown with control characters escaped
        self.push_screen(StepScreen(message.trace.for_display(), title, message.script_error,
                                    source_files=self.source_files, export_rule=self.export_rule))
        if self.script_output:
            lines = self.script_output.count("\n") + (not self.script_output.endswith("\n"))
            self.notify(f"the script printed {lines:,} line(s): o shows them", timeout=6)
        from agdb.tracer.sources.torch import divergence_text  # a bridge trace may say where agdb's model of the engine
        if diverged := divergence_text(message.trace):  # and torch's order differed (docs/torch-bridge.md)
            self.notify(diverged, title="agdb's model and torch disagree", severity="warning", timeout=20)

    @on(TraceFailed)
    def _failed(self, message: TraceFailed) -> None:
        self._stop_progress()
        self.failure = " ".join(printable(message.error).split())  # one line, for the CLI to print on exit
        # Text: a path or a message may hold [brackets], which a str would have parsed as markup.
        self.query_one("#status", Static).update(
            Text(f"agdb could not open this: {printable(message.error, keep_newlines=True)}\n\npress q to quit"))
        self.bind("q", "quit", description="Quit")
