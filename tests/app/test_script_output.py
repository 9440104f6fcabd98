"""The script's own output and thread under `agdb tui` (issue 16, item 6).

The TUI owns the terminal, so what the script prints is kept and shown on `o`; the script's thread is named
MainThread, as under `python SCRIPT` and `agdb record`, so a trace names its queue `cpu (MainThread)` however
it was recorded.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agdb.app.app import AgdbApp
from agdb.app.run_script import MAX_OUTPUT, _Output
from agdb.app.screens.output import OutputScreen
from agdb.app.screens.step import StepScreen
from agdb.tracer.store.tracefile import load
from tests.app.pilot import recorded

SCRIPT = """\
import sys
import threading
from agdb import engine as torch
print("hello [b]not markup[/b] from", threading.current_thread().name)
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
print("grad", x.grad.tolist())
print("a warning", file=sys.stderr)
"""
ROOT = Path(__file__).resolve().parents[2]
PRINTED = ["hello [b]not markup[/b] from MainThread", "grad [2.0, 2.0]", "a warning"]


async def test_tui_shows_what_the_script_printed(tmp_path):
    """`o` opens a screen with the script's stdout and stderr, line by line, markup shown as typed; the user
    is told at load that there is output; Escape closes it."""
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await recorded(app, pilot)
        assert any("the script printed 3 line(s): o shows them" in n.message for n in app._notifications)
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OutputScreen)
        shown = str(app.screen.query_one("#script-output").content)
        assert shown.splitlines() == PRINTED
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)


async def test_tui_names_the_scripts_thread_as_record_does(tmp_path):
    """The trace recorded by `agdb tui` names the script's thread MainThread, as `agdb record` does (no agdb
    thread name such as asyncio_0 or agdb-script)."""
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(120, 40)) as pilot:
        under_tui = [name for _, name in (await recorded(app, pilot)).trace.threads]
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "agdb", "record", str(script), "-o", str(tmp_path / "r.agdb")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    under_record = [name for _, name in load(tmp_path / "r.agdb").threads]
    assert under_tui == under_record == ["MainThread"]


def test_captured_output_keeps_the_last_characters():
    """Past MAX_OUTPUT characters, the capture keeps the last MAX_OUTPUT and says how many it left out."""
    out = _Output()
    for _ in range(5):
        out.write("x" * MAX_OUTPUT)
    out.write("END")
    text = out.text()
    assert text.endswith("x" * (MAX_OUTPUT - 3) + "END")
    assert text.startswith(f"[… the first {4 * MAX_OUTPUT + 3:,} characters are left out]\n")
