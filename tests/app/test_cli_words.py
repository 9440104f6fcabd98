"""What the command line says to a newcomer: no numpy warnings, tracebacks without agdb's frames, one default trace
name, one sentence for a syntax error, and no full-screen TUI for a run that records nothing.

Expected values come from the scripts themselves and from real torch run in a subprocess (it prints nothing for
inf * 0), never from agdb's own output.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.app.test_cli import agdb

NAN = """\
    import torch
    x = torch.tensor([float("inf"), 1.0], requires_grad=True)
    (x * 0).sum().backward()
"""

TWICE = """\
    import torch
    x = torch.ones(3, requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    y.backward()
"""


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _run(argv: list, cwd: Path) -> subprocess.CompletedProcess:
    """`python ARGV` in a subprocess, in `cwd`, with warnings at Python's defaults."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env={**env, "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=300)


def test_record_of_inf_times_zero_prints_no_numpy_warning(tmp_path):
    """`agdb record` of a script computing inf * 0 prints no RuntimeWarning, as torch prints none."""
    script = _script(tmp_path, "nan.py", NAN)
    done = _run(["-m", "agdb", "record", script], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert (tmp_path / "nan.agdb").is_file()


def test_real_torch_prints_nothing_for_inf_times_zero(tmp_path):
    """The truth the test above matches: torch itself prints nothing for the same script."""
    pytest.importorskip("torch")
    done = _run([_script(tmp_path, "nan.py", NAN)], tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_script_error_traceback_leaves_out_engine_frames(tmp_path, capsys):
    """A script that raised in backward shows its own lines and the error, and says agdb's frames were left
    out, as the TUI does."""
    script = _script(tmp_path, "twice.py", TWICE)
    code, _, err = agdb(["record", script, "-o", tmp_path / "twice.agdb"], capsys)
    assert code == 1
    assert 'twice.py", line 5' in err and "y.backward()" in err
    assert "RuntimeError: Trying to backward through the graph a second time" in err
    assert "_engine.py" not in err and "autograd/__init__.py" not in err, err
    assert "frame(s) of agdb left out" in err


def test_torch_without_output_names_the_trace_after_the_script(tmp_path):
    """`agdb torch SCRIPT` without -o writes SCRIPT's name with .agdb in the current directory, as
    `agdb record --torch` does."""
    pytest.importorskip("torch")
    script = _script(tmp_path / "", "lin.py", """\
        import torch
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
    """)
    here = tmp_path / "here"
    here.mkdir()
    done = _run(["-m", "agdb", "torch", script], here)
    assert done.returncode == 0, done.stderr
    assert (here / "lin.agdb").is_file()


def test_torch_of_a_syntax_error_says_one_thing(tmp_path):
    """`agdb torch` of a script that does not compile says it has a syntax error and was not run, and nothing
    about a trace kept or not written."""
    pytest.importorskip("torch")
    script = _script(tmp_path, "syn.py", "import torch\nx = (\n")
    done = _run(["-m", "agdb", "torch", script, "-o", tmp_path / "x.agdb"], tmp_path)
    assert done.returncode == 1
    assert "syntax error" in done.stderr and "was not run" in done.stderr
    assert "kept" not in done.stderr and "nothing was recorded" not in done.stderr, done.stderr
    assert not (tmp_path / "x.agdb").exists()


def test_tui_real_torch_that_records_nothing_says_so_without_the_tui(tmp_path, capsys, monkeypatch):
    """`agdb tui --real-torch SCRIPT` whose run records nothing says why on the command line and exits 1
    without opening the TUI."""
    pytest.importorskip("torch")
    from agdb.app import cli

    opened = []
    monkeypatch.setattr(cli, "_run_app", lambda app: opened.append(app) or 0)
    script = _script(tmp_path, "lin.py", """\
        import torch
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
    """)
    code, _, err = agdb(["tui", "--real-torch", script], capsys)
    assert (code, opened) == (1, [])
    assert "nothing was recorded" in err


async def test_tui_of_a_script_that_records_nothing_closes_for_the_command_line(tmp_path):
    """`agdb tui SCRIPT` whose run records nothing closes the TUI with status 1 and a failure for the command line
    to print, rather than waiting on a full screen that only says so."""
    from agdb.app.app import AgdbApp

    script = _script(tmp_path, "nothing.py", "print('hello')\n")
    app = AgdbApp(script=str(script))
    app.is_closed_when_empty = True
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
    assert app.return_code == 1
    assert app.failure is not None and "nothing was recorded" in app.failure


def test_a_script_beside_agdbs_packages_keeps_its_frames():
    """In a checkout agdb's packages share a folder with docs/examples/, bench/ and tests/: a script there is the
    user's, and its frames stay in the traceback; only engine/, tracer/, app/ and widgets/ are agdb's."""
    from agdb.app.tracebacks import AGDB_ROOT, user_frames

    text = (f'Traceback (most recent call last):\n  File "{AGDB_ROOT}/docs/examples/bad.py", line 3, in <module>\n'
            f'    y = x.foo()\n  File "{AGDB_ROOT}/engine/_tensor.py", line 9, in foo\n    raise ValueError("x")\n'
            "ValueError: x")
    shown = user_frames(text)
    assert 'docs/examples/bad.py", line 3' in shown and "y = x.foo()" in shown
    assert "_tensor.py" not in shown and "… 1 frame(s) of agdb left out" in shown
