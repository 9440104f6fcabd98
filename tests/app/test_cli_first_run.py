"""The CLI as a new user meets it (issue 16, item 7): early failures, defaults, and what each command says.

Each test pins one thing a first run meets: `open` of a missing or bad file, a script with a syntax
error, `record` without -o, Ctrl-C during `record`, an empty `culprits` table, `culprits --thread`, node
names and graph tasks in `show`, `--focus` by the TUI's numbers, and the permissions of written files.
"""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agdb.app.app import AgdbApp
from agdb.app.demo import record_example
from agdb.tracer.replay.node_states import node_states
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.tracefile import load, save
from tests.app.show_text import table
from tests.app.test_cli import agdb

ROOT = Path(__file__).resolve().parents[2]
SMALL = "import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n"


@pytest.fixture
def no_tui(monkeypatch):
    """Fail the test if the TUI would start."""
    def run(self, *args, **kwargs):
        raise AssertionError("the TUI started")

    monkeypatch.setattr(AgdbApp, "run", run)


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("first_run") / "demo.agdb"
    save(record_example(), path)
    return path


def _script(tmp_path: Path, text: str, name: str = "model.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- open ----------------------------------------------------------------------------------------------------------
def test_open_of_a_missing_file_fails_before_the_tui(tmp_path, capsys, no_tui):
    """`agdb open MISSING` says why on stderr and exits 1 without starting the TUI."""
    code, _, err = agdb(["open", tmp_path / "nope.agdb"], capsys)
    assert code == 1 and err.startswith("agdb: ") and "No such file" in err


def test_open_of_a_bad_file_fails_before_the_tui(tmp_path, capsys, no_tui):
    """`agdb open BAD` (not a trace) says why on stderr and exits 1 without starting the TUI."""
    bad = tmp_path / "bad.agdb"
    bad.write_text("garbage\n")
    code, _, err = agdb(["open", bad], capsys)
    assert code == 1 and err.startswith("agdb: ") and "not an agdb trace" in err


# -- scripts that do not compile -------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["record", "culprits", "tui"])
def test_a_syntax_error_is_reported_first(tmp_path, capsys, no_tui, command):
    """A script that does not compile: its SyntaxError (file, line, message) is the first thing said, nothing runs
    (no TUI, no "the script raised"), exit 1."""
    script = _script(tmp_path, "import agdb.engine\nx = (\n")
    code, out, err = agdb([command, script], capsys)
    assert code == 1 and out == ""
    assert err.splitlines()[0] == f"agdb: {script} has a syntax error, so it was not run:"
    assert f'File "{script}", line 2' in err and "SyntaxError: '(' was never closed" in err
    assert "the script raised" not in err
    assert not (tmp_path / "model.agdb").exists()


@pytest.mark.parametrize("command", ["record", "tui", "torch"])  # `agdb culprits run.agdb` reads the trace
def test_a_saved_trace_given_as_the_script_points_to_agdb_open(tmp_path, capsys, no_tui, command):
    """A trace file where the script belongs (`agdb tui run.agdb`): agdb says it is a trace and how to open it, rather
    than that it has a syntax error; nothing runs, exit 1, the trace left as it was."""
    path = tmp_path / "run.agdb"
    save(record_example(), path)
    before = path.read_bytes()
    code, out, err = agdb([command, path], capsys)
    assert code == 1 and out == ""
    assert err == f"agdb: {path} is a saved trace, not a script: open it with `agdb open {path}`\n"
    assert path.read_bytes() == before


# -- record --------------------------------------------------------------------------------------------------------
def test_record_writes_script_agdb_by_default(tmp_path, capsys, monkeypatch):
    """`agdb record src/model.py` without -o writes model.agdb in the current directory."""
    (tmp_path / "src").mkdir()
    script = _script(tmp_path / "src", SMALL)
    monkeypatch.chdir(tmp_path)
    code, _, err = agdb(["record", script], capsys)
    assert code == 0, err
    assert "wrote model.agdb" in err and len(load(tmp_path / "model.agdb")) > 0


def _sigint_as_at_a_terminal() -> None:
    """In the child before it runs: SIGINT back to its default disposition. A suite started in the background by a
    shell (`make test &`) inherits SIGINT ignored, and a Python started with it ignored keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_record_keeps_the_events(tmp_path):
    """SIGINT while `agdb record` runs an endless script: "interrupted: kept N events", the trace of N events is
    saved, and agdb dies of SIGINT as python would; no "the script raised", no traceback."""
    started = tmp_path / "started"
    # the marker comes after a first op, so that a SIGINT landing before the loop's first op still leaves events
    script = _script(tmp_path, "import sys\nimport agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n"
                               "(x * 2).sum()\nopen(sys.argv[1], 'w').close()\nwhile True:\n    (x * 2).sum()\n")
    out = tmp_path / "loop.agdb"
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "agdb", "record", str(script), "-o", str(out), "--",
                             str(started)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_sigint_as_at_a_terminal)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():  # the script is running: it has made its marker
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == -signal.SIGINT, err
    kept = next(line for line in err.splitlines() if line.startswith("agdb: interrupted: kept "))
    count = int(kept.removeprefix("agdb: interrupted: kept ").removesuffix(" events").replace(",", ""))
    assert len(load(out)) == count > 0
    assert "the script raised" not in err and "Traceback" not in err


@pytest.mark.parametrize("argv, suffix", [(["record", "SCRIPT", "-o", "OUT"], ".agdb"),
                                           (["export", "DEMO", "-o", "OUT"], ".dot")])
def test_written_files_get_the_usual_permissions(tmp_path, capsys, demo_file, argv, suffix):
    """Under umask 022, a recorded trace and an exported picture are rw-r--r-- (0644), not 0600."""
    script = _script(tmp_path, SMALL)
    out = tmp_path / f"out{suffix}"
    argv = [{"SCRIPT": script, "OUT": out, "DEMO": demo_file}.get(a, a) for a in argv]
    old = os.umask(0o022)
    try:
        code, _, err = agdb(argv, capsys)
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


# -- culprits ------------------------------------------------------------------------------------------------------
def test_culprits_says_why_a_range_is_empty(tmp_path, capsys, monkeypatch):
    """--from past the last increment prints no table and says the counter's range instead."""
    code, out, err = agdb(["culprits", _script(tmp_path, SMALL), "--from", "10"], capsys, monkeypatch)
    assert code == 0 and out == ""
    assert err == "agdb: no increment in --from 10: the counter moved from 0 to 2\n"


def test_culprits_says_the_script_failed_first(tmp_path, capsys, monkeypatch):
    """A script that raises before any op made a node: no table, and the reason, after the script's error."""
    script = _script(tmp_path, "import agdb.engine as torch\nraise RuntimeError('boom')\n")
    code, out, err = agdb(["culprits", script], capsys, monkeypatch)
    assert code == 1 and out == ""
    assert "RuntimeError: boom" in err
    assert "the sequence number never moved: the script failed before any op made a backward node" in err


def test_culprits_thread_keeps_that_threads_increments(tmp_path, capsys, monkeypatch):
    """--thread worker lists only the increments made on the thread named worker (its own counter, from 0)."""
    script = _script(tmp_path, SMALL + "import threading\n"
                                       "t = threading.Thread(target=lambda: (x.exp() * 3).sum(), name='worker')\n"
                                       "t.start(); t.join()\n")
    code, out, err = agdb(["culprits", script, "--thread", "worker", "--to", "2"], capsys, monkeypatch)
    assert code == 0, err
    rows = [line for line in out.splitlines() if "→" in line]
    assert [(r.split("│")[1].strip(), r.split("│")[2].strip(), r.split("│")[3].strip()) for r in rows] == [
        ("0 → 1", "ExpBackward0", "worker"), ("1 → 2", "MulBackward0", "worker")]


def test_culprits_unknown_thread_is_refused(tmp_path, capsys):
    """--thread naming no thread of the trace exits 1 and lists the trace's threads."""
    code, out, err = agdb(["culprits", _script(tmp_path, SMALL), "--thread", "nope"], capsys)
    assert code == 1 and out == ""
    assert err.startswith("agdb: --thread nope: no such thread in the trace (its threads: 0 (")


# -- show ----------------------------------------------------------------------------------------------------------
def test_show_names_nodes_in_its_lists(demo_file, capsys, monkeypatch):
    """Mid-backward, the dependencies table names nodes as every view does (name and seq_nr, or for an
    AccumulateGrad its leaf's variable: the demo's x and w), with each count and input buffer; AddBackward0, whose
    count reached 0 with a grad in its buffer, is about to be pushed."""
    trace = load(demo_file)
    step = 20
    state = Replay(trace).state_at(step)
    assert state.graph_tasks and len(state.graph_tasks[0].dependency_arrays()[0])
    code, out, err = agdb(["show", demo_file, "--step", step], capsys, monkeypatch)
    assert code == 0, err
    rows = table(out, "dependencies and input buffers:")
    assert [row[:3] for row in rows] == [
        ["ExpBackward0 seq 0", "2", ""], ["AccumulateGrad x", "1", ""], ["SinBackward0 seq 1", "1", ""],
        ["MulBackward0 seq 2", "1", ""], ["AccumulateGrad w", "1", ""], ["CosBackward0 seq 3", "1", ""],
        ["AddBackward0 seq 4", "0", "[x]"]]


def test_show_groups_executed_nodes_by_graph_task_with_reentrant_ones_nested(demo_file, capsys, monkeypatch):
    """At the end of the demo, `show --all` lists each graph task's nodes on its own line, the reentrant task
    run inside CubeBackward's backward indented under the task that ran CubeBackward."""
    code, out, err = agdb(["show", demo_file, "--all"], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("executed, by graph task:")
    groups = lines[start + 1:start + 7]
    assert [g.split(":")[0] for g in groups] == ["  graph task 1", "  graph task 2", "  graph task 3",
                                                "  graph task 4", "    graph task 5 (reentrant, depth 1)",
                                                "pruning"]
    assert groups[3] == "  graph task 4: SumBackward0 seq 17 → CubeBackward seq 16 → AccumulateGrad x"
    assert groups[4].endswith(": SumBackward0 seq 20 → MulBackward0 seq 19 → MulBackward0 seq 18 → "
                              "AccumulateGrad inner")


# -- export --focus ------------------------------------------------------------------------------------------------
def test_focus_names_the_execution_index_the_tui_shows(demo_file, tmp_path, capsys):
    """--focus 2 is the node the TUI numbers 2 (the third to run), --focus node:2 the trace's node 2."""
    trace = load(demo_file)
    order = node_states(trace, Replay(trace).state_at(len(trace) - 1))[1]
    third = int((order == 2).nonzero()[0][0])
    assert third != 2  # the two numberings differ here, so the test tells them apart
    for focus, node in (("2", third), ("node:2", 2)):
        out = tmp_path / "f.dot"
        code, _, err = agdb(["export", demo_file, "-o", out, "--focus", focus, "--radius", "0"], capsys)
        assert code == 0, err
        assert f"within 0 edges of node {node}\"" in out.read_text()


@pytest.mark.parametrize("command", ["tui", "record", "serve"])
def test_a_missing_script_fails_before_anything_starts(tmp_path, capsys, no_tui, command):
    """`agdb tui|record|serve MISSING.py` says there is no such script and exits 1 (no TUI, no server)."""
    code, out, err = agdb([command, tmp_path / "nope.py"], capsys)
    assert code == 1 and out == "" and err == f"agdb: no such script: {tmp_path / 'nope.py'}\n"


def test_plain_show_into_a_closed_pipe_ends_quietly(tmp_path):
    """`agdb show --all | head -1` (the text form, thousands of lines): no traceback, SIGPIPE's status."""
    from bench.show import chain_trace

    path = tmp_path / "chain.agdb"
    save(chain_trace(3000), path)
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "agdb", "show", str(path), "--all"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"step ")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "Exception ignored" not in err, err
