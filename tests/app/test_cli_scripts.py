"""How `agdb record`, `culprits`, `show` and `tui` behave when the script, the output or the reader misbehaves.

Every case runs the real command: `agdb.app.cli.main` in a fresh thread, or `python -m agdb` in a subprocess
where the case ends or moves the process (os.chdir, os._exit, a closed pipe, a terminal). Expected values
come from the scripts themselves (what they record, the status they exit with) and from Unix conventions
(a tool whose reader went away ends with 128 + SIGPIPE, quietly).
"""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import load, save
from bench.show import chain_trace
from tests.app.show_text import table
from tests.app.test_cli import agdb

ROOT = Path(__file__).resolve().parents[2]

SMALL = textwrap.dedent("""\
    import pathlib, sys
    from agdb import engine as torch

    pathlib.Path(sys.argv[0]).with_suffix(".ran").touch()  # proves the script ran
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
""")


HANG_GUARD_S = 60.0
"""How long a pseudo-terminal test waits for the TUI to show something or to exit: a guard against a hang, far
beyond the seconds a healthy run takes on a busy machine."""


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _cli(*argv, cwd, stdout=subprocess.PIPE, timeout=60) -> subprocess.CompletedProcess:
    """`python -m agdb ARGV` in a subprocess (agdb as installed in this interpreter)."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "agdb", *map(str, argv)], cwd=cwd, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def _bumped(path: Path) -> list[str]:
    return [e.node_name for e in load(path) if isinstance(e, ev.SeqNrBumped)]


# -- the output file, checked before the script runs ----------------------------------------------------------------
def test_record_to_a_missing_directory_fails_before_the_script_runs(tmp_path, capsys):
    """-o in a directory that does not exist: exit non-zero naming it, and the script never ran."""
    script = _script(tmp_path, "small.py", SMALL)
    code, _, err = agdb(["record", script, "-o", tmp_path / "missing" / "x.agdb"], capsys)
    assert code != 0 and "does not exist" in err and str(tmp_path / "missing") in err
    assert not script.with_suffix(".ran").exists()


def test_record_to_a_directory_fails_before_the_script_runs(tmp_path, capsys):
    """-o naming a directory: exit non-zero saying so, and the script never ran."""
    script = _script(tmp_path, "small.py", SMALL)
    code, _, err = agdb(["record", script, "-o", tmp_path], capsys)
    assert code != 0 and "is a directory" in err and "Traceback" not in err
    assert not script.with_suffix(".ran").exists()


def test_a_script_that_changes_directory_does_not_move_the_output(tmp_path):
    """A relative -o is where agdb was started, even when the script calls os.chdir before it ends."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _script(tmp_path, "cd.py", f"""\
        import os
        from agdb import engine as torch
        x = torch.ones(2, requires_grad=True)
        os.chdir({str(elsewhere)!r})
        (x * 2).sum().backward()
    """)
    done = _cli("record", "cd.py", "-o", "out.agdb", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _bumped(tmp_path / "out.agdb") == ["MulBackward0", "SumBackward0"]
    assert not (elsewhere / "out.agdb").exists()


# -- scripts that fail before recording anything --------------------------------------------------------------------
def test_a_syntax_error_never_replaces_a_good_trace(tmp_path, capsys):
    """A script that does not compile is not run: the existing -o file keeps its bytes, agdb says so (the
    SyntaxError first) and exits non-zero."""
    out = tmp_path / "good.agdb"
    assert agdb(["record", _script(tmp_path, "small.py", SMALL), "-o", out], capsys)[0] == 0
    before = out.read_bytes()
    code, _, err = agdb(["record", _script(tmp_path, "bad.py", "x = (\n"), "-o", out], capsys)
    assert code != 0 and "SyntaxError" in err and "was not run" in err
    assert out.read_bytes() == before


def test_a_script_failing_before_any_event_writes_no_empty_file(tmp_path, capsys):
    """A script raising before any autograd event leaves no -o file behind, and says so."""
    out = tmp_path / "none.agdb"
    code, _, err = agdb(["record", _script(tmp_path, "early.py", "raise RuntimeError('early')\n"), "-o", out], capsys)
    assert code != 0 and "RuntimeError: early" in err and "nothing was recorded" in err
    assert not out.exists()


def test_culprits_of_a_script_with_a_syntax_error_exits_non_zero(tmp_path, capsys):
    """`agdb culprits` on a script that does not compile shows the error, lists nothing and exits non-zero."""
    code, out, err = agdb(["culprits", _script(tmp_path, "bad.py", "x = (\n")], capsys)
    assert code != 0 and "SyntaxError" in err and "was not run" in err
    assert "sequence-number increments" not in out


# -- how the script ends becomes how agdb ends ----------------------------------------------------------------------
EXIT3 = """\
    import sys
    from agdb import engine as torch
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    sys.exit(3)
"""


def test_sys_exit_3_makes_record_exit_3_and_keeps_the_trace(tmp_path, capsys):
    """sys.exit(3): `record` exits 3, says the script exited with status 3, and the trace is saved;
    sys.exit("no data") exits 1, as Python does, and shows the message."""
    out = tmp_path / "e.agdb"
    code, _, err = agdb(["record", _script(tmp_path, "exit3.py", EXIT3), "-o", out], capsys)
    assert code == 3 and "exited with status 3" in err
    assert _bumped(out) == ["MulBackward0", "SumBackward0"]
    script = _script(tmp_path, "msg.py", EXIT3.replace("sys.exit(3)", "sys.exit('no data')"))
    code, _, err = agdb(["record", script, "-o", tmp_path / "m.agdb"], capsys)
    assert code == 1 and "no data" in err
    assert _bumped(tmp_path / "m.agdb") == ["MulBackward0", "SumBackward0"]


def test_culprits_exits_with_the_scripts_status(tmp_path, capsys):
    """`agdb culprits` of a script ending with sys.exit(3) lists its increments and exits 3."""
    code, out, _ = agdb(["culprits", _script(tmp_path, "exit3.py", EXIT3)], capsys)
    assert code == 3 and "MulBackward0" in out


OS_EXIT = """\
    import os
    from agdb import engine as torch
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    try:
        os._exit(4)
    finally:
        print("FINALLY RAN", flush=True)  # the real os._exit runs no finally block
"""


def test_os_exit_in_a_script_saves_the_trace_and_exits_with_its_status(tmp_path):
    """os._exit(4): agdb saves what was recorded, says so, exits 4, and nothing of the script runs after it."""
    _script(tmp_path, "osexit.py", OS_EXIT)
    done = _cli("record", "osexit.py", "-o", "x.agdb", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "os._exit(4)" in done.stderr and "wrote x.agdb" in done.stderr
    assert "FINALLY RAN" not in done.stdout
    assert _bumped(tmp_path / "x.agdb") == ["MulBackward0", "SumBackward0"]


def test_culprits_of_a_script_calling_os_exit_lists_them_and_exits_with_its_status(tmp_path):
    """`agdb culprits` of a script that calls os._exit(4) prints its increments before the process ends."""
    _script(tmp_path, "osexit.py", OS_EXIT)
    done = _cli("culprits", "osexit.py", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "MulBackward0" in done.stdout and "SumBackward0" in done.stdout


# -- show: a closed pipe, and what it costs -----------------------------------------------------------------------


def test_show_json_into_a_closed_pipe_ends_quietly_with_sigpipes_status(tmp_path):
    """`agdb show --json | head -1`: no traceback, no "Exception ignored", status 128 + SIGPIPE."""
    path = tmp_path / "chain.agdb"
    save(chain_trace(3000), path)
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "agdb", "show", str(path), "--json"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # the reader goes away, as head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_show_prints_a_few_rows_per_list_and_cuts_long_names(tmp_path, capsys, monkeypatch):
    """`agdb show` mid-backward on 3,000 nodes prints 20 dependencies and the last 20 executed nodes, with
    "… 1,779 more" and "… 1,180 earlier", and a 100,000-character name as 199 characters and an ellipsis."""
    path = tmp_path / "chain.agdb"
    save(chain_trace(3000, long_name_at=1195), path)
    step = 3003 + 5 * 1200  # 3,000 NodeCreated and the task's 3 first events, then 5 events per node run
    code, out, err = agdb(["show", path, "--step", step], capsys, monkeypatch)
    assert code == 0, err
    assert len(table(out, "dependencies and input buffers:")) == 20
    assert "… 1,779 more" in out and "… 1,180 earlier" in out
    assert "X" * 199 + "…" in out and "X" * 200 not in out
    assert len(out) < 12_000


def test_show_all_and_limit_choose_how_many_rows(tmp_path, capsys, monkeypatch):
    """--limit 5 prints 5 dependencies; --all prints every one, with no "more"."""
    path = tmp_path / "chain.agdb"
    save(chain_trace(100), path)
    step = 4 * 100 // 2 + 100 + 3
    _, five, _ = agdb(["show", path, "--step", step, "--limit", 5], capsys, monkeypatch)
    _, every, _ = agdb(["show", path, "--step", step, "--all"], capsys, monkeypatch)
    assert len(table(five, "dependencies and input buffers:")) == 5
    assert len(table(every, "dependencies and input buffers:")) > 20 and "more" not in every
    assert "earlier" not in every


def test_show_node_prints_only_that_nodes_rows(tmp_path, capsys, monkeypatch):
    """--node 60 (key 61 of 100: seq_nr 39) prints the inspector's lines (its name and seq_nr first) and, of the
    dependencies, its own count only; it has not run yet."""
    path = tmp_path / "chain.agdb"
    save(chain_trace(100), path)
    step = 4 * 100 // 2 + 100 + 3
    code, out, err = agdb(["show", path, "--step", step, "--node", 60], capsys, monkeypatch)
    assert code == 0, err
    assert "MulBackward0 seq 39  (node 60)" in out and "seq_nr 39  topological_nr 39" in out
    assert [row[:2] for row in table(out, "dependencies and input buffers:")] == [["MulBackward0 seq 39", "1"]]
    assert "executed: not yet" in out


def test_show_json_limit_counts_what_it_left_out(tmp_path, capsys):
    """--json --limit 3 keeps 3 dependencies and the last 3 executed nodes, and "omitted" counts the rest."""
    import json

    path = tmp_path / "chain.agdb"
    save(chain_trace(100), path)
    step = 4 * 100 // 2 + 100 + 3
    _, full, _ = agdb(["show", path, "--step", step, "--json"], capsys)
    _, cut, _ = agdb(["show", path, "--step", step, "--json", "--limit", 3], capsys)
    full, cut = json.loads(full), json.loads(cut)
    assert list(cut["dependencies"]) == list(full["dependencies"])[:3]
    assert cut["executed"] == full["executed"][-3:]
    assert cut["omitted"] == {"dependencies": len(full["dependencies"]) - 3, "executed": len(full["executed"]) - 3}
    assert "omitted" not in full


# -- the TUI in a terminal --------------------------------------------------------------------------------------------
def _tui_in_a_terminal(script: Path, cwd: Path, keys: bytes, ready: str):
    """`agdb tui SCRIPT` in a pseudo-terminal: `keys` typed once the screen shows `ready`; (whether it exited
    after the keys, the screen's text with blanks squeezed). Each wait ends at HANG_GUARD_S, a guard only."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes agdb
        os.chdir(cwd)
        os.environ.update(TERM="xterm-256color")
        os.execv(sys.executable, [sys.executable, "-m", "agdb", "tui", str(script)])
    screen = bytearray()
    exited = False

    def text() -> str:
        return " ".join(re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", " ", screen.decode(errors="replace")).split())

    def pump_until(condition) -> None:
        """Read the screen until `condition()` holds, the child exits or the guard runs out."""
        nonlocal exited
        end = time.monotonic() + HANG_GUARD_S
        while not condition() and not exited and time.monotonic() < end:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    screen.extend(os.read(fd, 65536))
                except OSError:
                    pass
            exited = os.waitpid(pid, os.WNOHANG)[0] != 0

    pump_until(lambda: ready in text())
    assert ready in text(), f"never showed {ready!r}: {text()[-2000:]}"
    os.write(fd, keys)
    pump_until(lambda: False)
    if not exited:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)
    return exited, text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="drives a Linux pseudo-terminal")
def test_tui_on_a_script_reading_stdin_says_so_and_quits_on_q(tmp_path):
    """A script calling input() under `agdb tui` gets EOF at once (not the keyboard), the TUI says it wanted
    input, and q then quits."""
    script = _script(tmp_path, "ask.py", "import agdb.engine as torch\nname = input('name? ')\n")
    exited, screen = _tui_in_a_terminal(script, tmp_path, b"q", ready="read its standard input")
    assert exited, screen[-2000:]
    assert "EOFError" in screen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="drives a Linux pseudo-terminal")
@pytest.mark.parametrize("key", [b"q", b"\x11"], ids=["q", "ctrl+q"])
def test_tui_quits_at_once_while_a_script_is_still_recording(tmp_path, key):
    """q or ctrl+q while a never-ending script records ends agdb (it does not wait for the script, which never
    ends)."""
    script = _script(tmp_path, "forever.py", """\
        import time
        from agdb import engine as torch
        x = torch.ones(2, requires_grad=True)
        while True:
            (x * 2).sum().backward()
            time.sleep(0.5)
    """)
    exited, screen = _tui_in_a_terminal(script, tmp_path, key, ready="q quits")
    assert exited, screen[-2000:]
