"""The culprit source view, `agdb culprits` and `agdb show` never read a file a trace names: they show the source
lines the trace stored when it was recorded; for a trace without stored source, only a regular file the user
named on the command line. A crafted trace naming a secret file, /etc/passwd, /dev/zero or a FIFO shows none
of it and does not hang.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.tracer import TraceBuilder
from agdb.tracer.store.trace import Trace
from agdb.tracer.store.tracefile import load, save
from agdb.widgets.culprits import CulpritsView
from tests.tracer.loader_fuzz import CASE_TIMEOUT_S, deadline, run_isolated
from tests.tracer.test_loader_fuzz import _old_file

MARKER = "TOP_SECRET_MARKER"
SCRIPT_LINES = ["import agdb.engine", "x = 1", f"{MARKER} = 'the secret'", "y = x * 2", "z = y + 1"]


def _trace_naming(filename: str, lineno: int = 3) -> Trace:
    """A small trace whose one culprit is at `filename`:`lineno`, made while that path does not exist (so the
    trace stores no line of it) and then renamed to it: what a crafted file looks like."""
    placeholder = "/nonexistent/agdb-placeholder.py"
    b = TraceBuilder(source="test")
    main_thread = b.thread("MainThread")
    frame = b.frame(placeholder, lineno, "<module>", source="y = x * 2")
    b.seq_nr_bumped(thread=main_thread, node=1, name="MulBackward0", old=0, seq_nr=1, frame=frame)
    b.node_created(thread=main_thread, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, frame=frame)
    trace = b.finish()
    strings = [filename if s == placeholder else s for s in trace.strings]
    return Trace(dict(trace.columns), strings, trace.meta)


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "secret.py"
    path.write_text("\n".join(SCRIPT_LINES) + "\n")
    return path


async def _source_view_text(path: Path, source_files=()) -> str:
    """Open `path` in the TUI, choose the first culprit and return what the source view shows."""
    app = AgdbApp(path=str(path), source_files=source_files)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        screen.step = len(screen.trace) - 1
        await pilot.press("7")
        screen.query_one(CulpritsView).cursor = 0
        await pilot.press("enter")
        await pilot.pause()
        shown = screen.query_one("#source").content
        return getattr(shown, "code", None) or str(shown)


def _view(path: Path, source_files=()) -> str:
    with deadline(CASE_TIMEOUT_S):  # a FIFO or /dev/zero read would never return; a healthy one takes seconds
        return asyncio.run(_source_view_text(path, source_files))


def _save(trace: Trace, path: Path, version: int = 3) -> Path:
    if version == 3:
        save(trace, path, durable=False)
    else:
        path.write_bytes(_old_file(trace, version))
    return path


@pytest.mark.parametrize("version", [3, 2])
def test_a_crafted_trace_never_shows_the_file_it_names(version, secret, tmp_path):
    """A trace (version 3 without that file's lines, or version 2 with no stored source) naming a secret file:
    the source view says it has no source, and shows nothing of the file."""
    text = _view(_save(_trace_naming(str(secret)), tmp_path / "crafted.agdb", version))
    assert MARKER not in text and "the secret" not in text
    assert "secret.py:3" in text and "source" in text


@pytest.mark.parametrize("version", [3, 2])
def test_a_crafted_trace_naming_etc_passwd_shows_none_of_it(version, tmp_path):
    """A trace naming /etc/passwd at line 1 does not show its first line."""
    passwd = Path("/etc/passwd")
    if not passwd.is_file():
        pytest.skip("no /etc/passwd here")
    first = passwd.read_text(errors="replace").splitlines()[0]
    text = _view(_save(_trace_naming(str(passwd), 1), tmp_path / "passwd.agdb", version))
    assert first not in text and "/etc/passwd:1" in text


ODD = ("dev_zero", "fifo", "directory")


@pytest.fixture(scope="module")
def odd_views(tmp_path_factory) -> tuple[dict[str, Path], dict[str, str], str]:
    """The source view of an old trace naming /dev/zero (endless), a FIFO (blocks until a writer comes) or a
    directory, each also named by the user, all three in one subprocess of limited memory and time (where a
    regression fails instead of filling the machine; one child, not three, since starting one costs a second of
    CPU): the targets, the text shown for each target the child got through, and its stderr."""
    tmp = tmp_path_factory.mktemp("odd")
    targets = {"dev_zero": Path("/dev/zero"), "fifo": tmp / "pipe.py", "directory": tmp}
    os.mkfifo(targets["fifo"])
    args = []
    for kind in ODD:
        args += [kind, str(_save(_trace_naming(str(targets[kind])), tmp / f"{kind}.agdb", 2)), str(targets[kind])]
    code = ("import json, sys\nfrom pathlib import Path\nfrom tests.app.test_source_safety import _view\n"
            "for kind, path, target in zip(*[iter(sys.argv[1:])] * 3):\n"
            "    print(json.dumps([kind, _view(Path(path), source_files=[target])]), flush=True)\n")
    try:
        done = run_isolated(code, *args, timeout=120 * len(ODD))
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:  # the kinds viewed before the one that hung still count
        out, err = e.stdout or "", f"the child did not answer: {e.stderr or ''}"
    out = out.decode() if isinstance(out, bytes) else out
    err = err.decode() if isinstance(err, bytes) else err
    shown = dict(json.loads(line) for line in out.splitlines() if line.startswith("["))
    return targets, shown, err


@pytest.mark.parametrize("kind", ODD)
def test_a_trace_naming_a_device_or_a_pipe_does_not_hang(kind, odd_views):
    """/dev/zero, a FIFO or a directory, named by an old trace and even by the user: the source view answers at
    once with no source."""
    targets, shown, err = odd_views
    assert kind in shown, f"the source view of a trace naming {targets[kind]} did not answer: {err[-800:]}"
    assert f"{targets[kind]}:3" in shown[kind]


def test_an_old_trace_shows_a_file_the_user_named(secret, tmp_path):
    """A version 2 trace shows its culprit's file when the user named that file (`agdb open T --source FILE`)."""
    text = _view(_save(_trace_naming(str(secret)), tmp_path / "old.agdb", 2), source_files=[str(secret)])
    assert MARKER in text and text.splitlines()[2].startswith(MARKER)


def test_a_recorded_trace_shows_its_stored_lines_once_the_file_is_gone(tmp_path, monkeypatch):
    """Recording stores the lines around each frame, the file's name made absolute: the view shows them from
    the trace, though the script was given by a relative name, is deleted, and agdb runs elsewhere."""
    script = tmp_path / "model.py"
    script.write_text("\n".join(SCRIPT_LINES) + "\n")
    monkeypatch.chdir(tmp_path)
    b = TraceBuilder(source="test")
    main_thread = b.thread("MainThread")
    frame = b.frame("model.py", 4, "<module>")
    b.seq_nr_bumped(thread=main_thread, node=1, name="MulBackward0", old=0, seq_nr=1, frame=frame)
    b.node_created(thread=main_thread, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, frame=frame)
    path = _save(b.finish(), tmp_path / "recorded.agdb")
    script.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    trace = load(path)
    assert trace.node(0).filename == str(script) and trace.node(0).source == "y = x * 2"
    text = _view(path)
    assert text.splitlines()[3] == "y = x * 2" and MARKER in text


def test_culprits_and_show_print_nothing_of_a_named_file(secret, tmp_path, capsys, monkeypatch):
    """`agdb culprits` and `agdb show` on a crafted trace naming a secret file print none of its lines."""
    monkeypatch.setenv("COLUMNS", "300")
    for version in (2, 3):
        path = _save(_trace_naming(str(secret)), tmp_path / f"crafted{version}.agdb", version)
        for argv in (["culprits", path], ["show", path], ["show", path, "--json"]):
            assert main([str(a) for a in argv]) == 0
            out, err = capsys.readouterr()
            assert MARKER not in out + err and "the secret" not in out + err


def test_a_stored_line_at_a_huge_number_is_shown_at_once(secret, tmp_path):
    """A crafted trace whose stored source and culprit sit at line 10**12: the view shows those lines, numbered so,
    without building the 10**12 lines before them."""
    import numpy as np

    b = TraceBuilder(source="test")
    main_thread = b.thread("MainThread")
    frame = b.frame(str(secret), 3, "<module>")
    b.seq_nr_bumped(thread=main_thread, node=1, name="MulBackward0", old=0, seq_nr=1, frame=frame)
    b.node_created(thread=main_thread, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, frame=frame)
    trace = b.finish()
    columns = dict(trace.columns)
    for name in ("frame_line", "source_line"):
        columns[name] = np.asarray(trace.columns[name], dtype=np.int64) + 10**12
    path = _save(Trace(columns, list(trace.strings), trace.meta), tmp_path / "far.agdb")
    text = _view(path)
    assert text.splitlines()[3] == SCRIPT_LINES[2]  # the view starts 3 lines above, at 10**12
