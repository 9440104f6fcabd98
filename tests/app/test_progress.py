"""Progress while agdb records: one line on stderr when it is a terminal (the phase, the events so far, the time
elapsed), nothing on a pipe, the script's own output left where it goes, Ctrl-C still saving; and the TUI's
loading screen showing the same.

The terminal is a real pseudo-terminal (os.openpty) given to a real `agdb` child as its stderr (and stdout where
said); a thread drains it, so the child never blocks on a full terminal. Waits have a deadline as a hang guard only.
"""
from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agdb.app.run_progress import RunProgress
from agdb.tracer.store.tracefile import load

DEADLINE = 120.0
"""Seconds a child may take (a hang guard, never a measure)."""

HELLO = textwrap.dedent("""\
    import agdb.engine as torch
    print("hello from the script")
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    print("partial", end="", flush=True)
    print(" line")
""")
"""A script that prints a line, records a backward, then prints a line in two writes."""

ELAPSED = re.compile(r"\d+:\d\d")


class _Terminal:
    """A pseudo-terminal 100 columns wide whose output a thread keeps reading."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        os.close(self.slave)  # the child holds it now: reading ends with EIO once the child has gone
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self._chunks.append(data)

    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", "replace")

    def close(self) -> str:
        self._reader.join(DEADLINE)
        os.close(self.master)
        return self.text()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES",
                                                            "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env["TERM"] = "xterm-256color"
    return env


def _start(tmp_path: Path, argv: list, terminal: _Terminal | None, stdout_too: bool = False) -> subprocess.Popen:
    err = terminal.slave if terminal is not None else subprocess.PIPE
    out = terminal.slave if terminal is not None and stdout_too else subprocess.PIPE
    proc = subprocess.Popen([sys.executable, "-m", "agdb", *map(str, argv)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=err, env=_env(),
                            preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT,)])
    if terminal is not None:
        terminal.start()
    return proc


def _run(tmp_path: Path, argv: list, terminal: _Terminal | None, stdout_too: bool = False) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `agdb ARGV`; stderr is the terminal's output when there is one."""
    proc = _start(tmp_path, argv, terminal, stdout_too)
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    if terminal is not None:
        err = terminal.close()
    return proc.returncode, (out or b"").decode(), err if isinstance(err, str) else (err or b"").decode()


def _screen(text: str) -> list[str]:
    """The lines a terminal shows after `text`: carriage return, erase-line and the pty's \\r\\n understood, other
    escape sequences dropped."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r\n|.", text, flags=re.S):
        if token == "\x1b[2K":
            line = []
        elif token.startswith("\x1b"):
            continue
        elif token == "\r":
            col = 0
        elif token in ("\n", "\r\n"):
            lines.append("".join(line))
            line, col = [], 0
        else:
            line[col:col + 1] = [token] if col < len(line) else line[col:] + [" "] * (col - len(line)) + [token]
            col += 1
    if line:
        lines.append("".join(line))
    return lines


def _frames(text: str) -> list[str]:
    """Every drawing of the progress line (what follows each erase), escape sequences dropped."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\x00", text.replace("\x1b[2K", "\x01"))
    return [frame.replace("\x00", "").split("\r")[0].strip() for frame in plain.split("\x01")[1:]]


def _count(frame: str) -> int:
    return int(re.search(r"([\d,]+) events", frame).group(1).replace(",", ""))


def test_no_line_where_the_terminal_is_not_interactive(monkeypatch):
    """`agdb torch --nproc`'s ranks share one terminal and set TTY_INTERACTIVE=0 while agdb's console is made
    (rank_worker.py): they draw no line each, as Rich's own live displays draw none."""
    import io

    from rich.console import Console

    from agdb.app.progress_line import ProgressLine

    monkeypatch.setenv("TTY_INTERACTIVE", "0")
    console = Console(file=io.StringIO(), force_terminal=True)
    assert console.is_terminal and not ProgressLine(RunProgress("running script"), console).is_shown
    monkeypatch.delenv("TTY_INTERACTIVE")
    assert ProgressLine(RunProgress("running script"), Console(file=io.StringIO(), force_terminal=True)).is_shown


def test_progress_polls_the_sources_counter_and_tells_each_phase():
    """RunProgress reads the events from the source it watches, keeps the count once settled, and tells each change
    of phase to its listeners (at once, from the thread that changed it)."""

    class Source:
        num_events = 0

    source, progress, phases = Source(), RunProgress(), []
    remove = progress.on_change(lambda: phases.append((progress.phase, progress.total)))
    progress.watch(source)
    source.num_events = 41
    assert progress.events == 41
    progress.enter("running script")
    progress.enter("freezing trace", 10)
    progress.advance(5, 10)  # not a change of phase
    progress.advance(10, 10)
    progress.settle(42)
    source.num_events = 99
    remove()
    progress.enter("saving")
    assert progress.events == 42
    assert phases == [("running script", 0), ("freezing trace", 10), ("freezing trace", 10)]


def test_record_on_a_terminal_shows_phases_events_and_time_and_keeps_stdout(tmp_path):
    """`agdb record` with stderr on a terminal draws the progress line there (running script, freezing trace,
    saving, the events so far up to the trace's length, the time elapsed) and erases it; the script's prints still go
    to stdout, a pipe, unchanged."""
    (tmp_path / "hello.py").write_text(HELLO)
    status, out, err = _run(tmp_path, ["record", "hello.py", "-o", "t.agdb"], _Terminal())
    assert status == 0, err
    assert out == "hello from the script\npartial line\n"
    frames = _frames(err)
    for phase in ("running script", "freezing trace", "saving"):
        assert any(f"{phase} · " in f for f in frames), (phase, frames)
    n = len(load(tmp_path / "t.agdb"))
    assert max(_count(f) for f in frames if " events · " in f) == n > 0
    assert all(ELAPSED.search(f.split(" · ")[-1]) for f in frames if " · " in f)
    assert _screen(err)[-1:] == [f"wrote t.agdb: {n} events, 3 nodes"]


def test_script_output_on_the_same_terminal_is_never_overwritten(tmp_path):
    """With stdout and stderr on one terminal, the script's lines stand whole on their own lines (the progress line
    is erased before each write and never drawn after a half-written line), and no progress is left on screen."""
    (tmp_path / "hello.py").write_text(HELLO)
    status, _, err = _run(tmp_path, ["record", "hello.py", "-o", "t.agdb"], _Terminal(), stdout_too=True)
    assert status == 0, err
    assert "running script" in err  # the line was drawn
    screen = [line for line in _screen(err) if line.strip()]
    n = len(load(tmp_path / "t.agdb"))
    assert screen == ["hello from the script", "partial line", f"wrote t.agdb: {n} events, 3 nodes"], screen


def test_nothing_but_the_usual_on_pipes(tmp_path):
    """With stdout and stderr on pipes there is no progress: no escape sequence and no phase on stderr, and stdout
    holds the script's output alone."""
    (tmp_path / "hello.py").write_text(HELLO)
    status, out, err = _run(tmp_path, ["record", "hello.py", "-o", "t.agdb"], None)
    assert status == 0, err
    assert out == "hello from the script\npartial line\n"
    assert "\x1b" not in err and "running script" not in err and "\r" not in err
    assert err == f"wrote t.agdb: {len(load(tmp_path / 't.agdb'))} events, 3 nodes\n"


def test_torch_on_a_terminal_shows_every_phase_of_the_bridge(tmp_path):
    """`agdb torch` on a terminal: loading torch, running script, reconstructing, freezing trace and saving are each
    drawn, and the count reaches the saved trace's events."""
    pytest.importorskip("torch")
    (tmp_path / "s.py").write_text(HELLO.replace("agdb.engine", "torch"))
    status, out, err = _run(tmp_path, ["torch", "s.py", "-o", "t.agdb"], _Terminal())
    assert status == 0, err
    assert out == "hello from the script\npartial line\n"
    frames = _frames(err)
    for phase in ("loading torch", "running script", "reconstructing", "freezing trace", "saving"):
        assert any(f"{phase} · " in f for f in frames), (phase, frames)
    assert max(_count(f) for f in frames if " events · " in f) == len(load(tmp_path / "t.agdb"))


def test_fx_torch_json_on_a_terminal_shows_the_phase_and_keeps_stdout_json(tmp_path):
    """`agdb fx --torch --json` with stderr on a terminal: the line shows the phase and the time (it records no
    events, so it counts none), and stdout is the JSON alone. AOTAutograd makes the graphs agdb keeps whatever the
    backend; aot_eager spares the child Inductor's code generation (about 2 s of its 7 s of CPU)."""
    pytest.importorskip("torch")
    import json

    (tmp_path / "s.py").write_text(textwrap.dedent("""\
        import torch
        f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="aot_eager")
        f(torch.randn(4, requires_grad=True)).backward()
    """))
    status, out, err = _run(tmp_path, ["fx", "s.py", "--torch", "--json"], _Terminal())
    assert status == 0, err
    assert json.loads(out)["graphs"]
    frames = [f for f in _frames(err) if " · " in f]
    assert frames and all(f.endswith(ELAPSED.findall(f)[-1]) and "events" not in f for f in frames), frames
    assert any("running script · " in f for f in frames), frames


def test_ctrl_c_with_the_progress_line_saves_the_partial_trace(tmp_path):
    """SIGINT while the progress line is drawn on the terminal: the trace recorded so far is saved, marked partial,
    and agdb dies of SIGINT, as without the line."""
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent("""\
        import sys
        import agdb.engine as torch
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
        open(sys.argv[1], "w").close()
        while True:
            (w * 2).relu().sum().backward()
    """))
    terminal = _Terminal()
    proc = _start(tmp_path, ["record", "loop.py", "-o", "t.agdb", "--", "started"], terminal)
    try:
        deadline = time.monotonic() + DEADLINE
        while not ((tmp_path / "started").exists() and "running script" in terminal.text()):
            assert proc.poll() is None and time.monotonic() < deadline, terminal.text()[-2000:]
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        proc.wait(DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = terminal.close()
    assert proc.returncode == -signal.SIGINT, err[-3000:]
    trace = load(tmp_path / "t.agdb")
    assert trace.meta["partial"] == "SIGINT" and len(trace) > 0
    assert f"agdb: interrupted: kept {len(trace):,} events" in _screen(err)


def test_a_child_forked_while_the_line_is_drawn_can_print():
    """A process the script forks while the drawing thread holds the line's lock (a DataLoader worker) prints
    through the wrapped stream without waiting for a lock no thread of it will release."""
    from rich.console import Console

    from agdb.app.progress_line import ProgressLine, _AboveProgress

    read_end, write_end = os.pipe()
    line = ProgressLine(RunProgress(), Console(file=open(os.devnull, "w"), force_terminal=True))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with line._lock:
            held.set()
            release.wait()

    with line:  # shown: a forked child must turn it off
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:  # the child: print, then end without running the parent's clean-up
            try:
                _AboveProgress(os.fdopen(write_end, "w"), line).write("from the child\n")
            finally:
                os._exit(0)
        try:
            deadline = time.monotonic() + DEADLINE
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise AssertionError("the forked child hung on the progress line's lock")
                time.sleep(0.01)
        finally:
            release.set()
    os.close(write_end)
    with os.fdopen(read_end) as child_output:
        assert child_output.read() == "from the child\n"


async def test_tui_loading_screen_shows_phase_count_and_bar(tmp_path):
    """While `agdb tui SCRIPT` records, the loading screen says the phase, the events recorded so far and the time
    elapsed, and shows a progress bar; the trace opens once the script ends."""
    from textual.widgets import ProgressBar

    from agdb.app.app import AgdbApp
    from tests.app.pilot import recorded, status_text, wait_for

    read_end, write_end = os.pipe()
    script = tmp_path / "gate.py"
    script.write_text(textwrap.dedent("""\
        import os, sys
        import agdb.engine as torch
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        os.read(int(sys.argv[1]), 1)  # waits until the test has seen the loading screen
    """))
    app = AgdbApp(script=str(script), script_args=[str(read_end)])
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: re.search(r"… [1-9][\d,]* events\nrunning script · \d+:\d\d",
                                                    status_text(app)) is not None,
                           "the loading screen never showed the phase and a count")
            bar = app.query_one("#progress", ProgressBar)
            assert bar.display and not bar.has_class("-hidden")
            os.write(write_end, b"x")
            screen = await recorded(app, pilot)
            assert len(screen.trace) > 0
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_torch_count_moves_while_the_recording_s_end_reconstructs(monkeypatch):
    """record("torch")'s default writes the backward calls' events when the recording ends (NOTE [observe now,
    reconstruct later] in tracer/sources/torch/bridge.py): in the reconstructing phase the count the display reads
    goes on from the forward's, call by call, up to the trace's length."""
    real = pytest.importorskip("torch")
    from agdb.app.run_progress import RECONSTRUCTING
    from agdb.tracer.sources.source import make_source
    from agdb.tracer.sources.torch.reconstruct import Reconstruction

    progress = RunProgress()
    source = make_source("torch").attach()
    progress.watch(source)
    try:
        x = real.ones(2, requires_grad=True)
        for _ in range(3):
            (x.tanh() * 2).sum().backward()
    finally:
        counted = progress.events
        seen: list[tuple[str, int]] = []
        ended = Reconstruction._task_ended
        monkeypatch.setattr(Reconstruction, "_task_ended",
                            lambda self, call, complete: (seen.append((progress.phase, progress.events)),
                                                          ended(self, call, complete)))
        progress.enter(RECONSTRUCTING)
        trace = source.finish()
    assert [phase for phase, _ in seen] == [RECONSTRUCTING] * 3
    counts = [n for _, n in seen]
    assert counted < counts[0] < counts[1] < counts[2] <= len(trace), (counted, counts, len(trace))
