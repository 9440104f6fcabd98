"""Files agdb writes: a read-only file at `-o` is refused in one line (export replaces it with --force), and a
write that fails (a full disk, a file-size limit) says which file in one line and leaves the old file as it was.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agdb.app.cli import main
from agdb.tracer.store.tracefile import load, save
from tests.tracer.test_every_trace_opens import one_backward

OLD = b"the file that was there\n"


@pytest.fixture()
def trace_file(tmp_path) -> Path:
    path = tmp_path / "run.agdb"
    save(one_backward(), path)
    return path


def _read_only(path: Path) -> Path:
    path.write_bytes(OLD)
    path.chmod(0o444)
    return path


def test_export_refuses_a_read_only_output_unless_forced(tmp_path, trace_file, capsys):
    """`agdb export -o` onto a 0444 file says so in one line and leaves it; with --force it is replaced. Before, the
    rename replaced it without a word (even for a user who may not write it, the folder being theirs)."""
    out = _read_only(tmp_path / "graph.dot")
    assert main(["export", str(trace_file), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "read-only" in err and "--force" in err
    assert out.read_bytes() == OLD
    assert main(["export", str(trace_file), "-o", str(out), "--force"]) == 0
    assert out.read_bytes().startswith(b"digraph")


def test_save_refuses_a_read_only_file(tmp_path):
    """`save` onto a 0444 file raises PermissionError naming it, and the file keeps its bytes."""
    out = _read_only(tmp_path / "kept.agdb")
    with pytest.raises(PermissionError) as e:
        save(one_backward(), out)
    assert e.value.filename == str(out) and "read-only" in e.value.strerror
    assert out.read_bytes() == OLD


def test_record_refuses_a_read_only_output_before_running_the_script(tmp_path, capsys):
    """`agdb record SCRIPT -o FILE` with a read-only FILE says so before the script runs (its recording would be
    lost after it ran)."""
    marker = tmp_path / "ran"
    script = tmp_path / "script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    out = _read_only(tmp_path / "run.agdb")
    assert main(["record", str(script), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "read-only" in err
    assert not marker.exists() and out.read_bytes() == OLD


def _limited(limit: int):
    """A child process that may write files of at most `limit` bytes: a write past it fails with EFBIG, as one on a
    full disk fails with ENOSPC (SIGXFSZ ignored, so that the write fails instead of killing the process)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return apply


@pytest.mark.parametrize("command", ["export", "save"])
def test_a_failed_write_names_the_file_in_one_line(tmp_path, trace_file, command):
    """A write the system refuses midway (here a file-size limit, EFBIG, as a full disk gives ENOSPC) ends with one
    line naming the file agdb was writing, the old file left as it was and no temporary left behind; before, the
    line was `[Errno 28] No space left on device` with no file named."""
    out = tmp_path / ("graph.dot" if command == "export" else "copy.agdb")
    out.write_bytes(OLD)
    if command == "export":
        argv = [sys.executable, "-m", "agdb", "export", str(trace_file), "-o", str(out)]
    else:
        argv = [sys.executable, "-c", "import sys\nfrom agdb.tracer.store.tracefile import load, save\n"
                "try:\n    save(load(sys.argv[1]), sys.argv[2])\n"
                "except OSError as e:\n    print(f'{e.filename}: {e.strerror}', file=sys.stderr)\n    sys.exit(1)\n",
                str(trace_file), str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=_limited(512),
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "File too large" in lines[0], done.stderr
    assert "left as it was" in lines[0]
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, trace_file.name])
    load(trace_file)  # the trace read is untouched too
