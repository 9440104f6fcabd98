"""Recording stores the source lines around each frame's line, with the file's name made absolute against the
directory the recording started in, so that no reader opens a path a trace names; and recording reads only
regular files (code compiled with a file name like /dev/zero or a FIFO neither hangs nor fills memory).
"""
from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

from agdb.tracer.store.tracefile import load, save
from tests.tracer.loader_fuzz import run_isolated

SCRIPT = [f"# line {i}" for i in range(1, 11)] + [
    "import os; from agdb import engine",
    "x = engine.tensor([1.0, 2.0], requires_grad=True)",
    "y = x.exp()  # the culprit line",
    "os.chdir(ELSEWHERE)",
    "y.sum().backward()",
] + [f"# tail {i}" for i in range(1, 6)]


def _record(code_name: str, text: str, elsewhere: str):
    from agdb import tracer
    from tests.engine.helpers import run_in_thread

    def go():
        with tracer.record() as rec:
            exec(compile(text, code_name, "exec"), {"ELSEWHERE": elsewhere})
        return rec.trace

    return run_in_thread(go)


def test_recorded_frames_are_absolute_and_their_lines_stored(tmp_path, monkeypatch):
    """A script known by a relative name that chdirs before its backward: its frames name the absolute file
    (made from the directory the recording started in), and the trace holds the lines around each frame's line,
    before and after a save, once the file is gone."""
    (tmp_path / "model.py").write_text("\n".join(SCRIPT) + "\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    try:
        trace = _record("model.py", "\n".join(SCRIPT) + "\n", str(tmp_path / "elsewhere"))
    finally:
        os.chdir(tmp_path)
    exp = next(trace.node(i) for i in range(trace.num_nodes) if trace.node(i).name == "ExpBackward0")
    assert exp.filename == str(tmp_path / "model.py") and exp.lineno == 13
    assert exp.source == "y = x.exp()  # the culprit line"
    from agdb.tracer.store.schema import SOURCE_CONTEXT

    first, last = 13 - SOURCE_CONTEXT, 13 + SOURCE_CONTEXT
    want = {n: SCRIPT[n - 1] for n in range(first, last + 1)}
    assert trace.source_lines(exp.filename, first, last) == want
    save(trace, tmp_path / "t.agdb", durable=False)
    (tmp_path / "model.py").unlink()
    assert load(tmp_path / "t.agdb").source_lines(exp.filename, first, last) == want


_RECORD_NAMED = textwrap.dedent("""\
    import logging, sys
    from agdb import engine, tracer
    if sys.argv[2] == "log":
        logging.basicConfig(level=logging.INFO)  # the culprit logger reads the line of every bump live
    code = compile("x = engine.tensor([1.0], requires_grad=True)\\ny = x.exp()\\ny.sum().backward()\\n",
                   sys.argv[1], "exec")
    with tracer.record() as rec:
        exec(code, {"engine": engine})
    frames = {rec.trace.node(i).filename for i in range(rec.trace.num_nodes)} - {""}
    # VmHWM, this process's own peak: ru_maxrss carries over the forked parent's (pytest's, with torch loaded)
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1]
    print("peak MB", int(hwm) // 1024)
    print("frames", sorted(frames), "stored", rec.trace.source_lines(sys.argv[1], 1, 10))
""")


@pytest.mark.parametrize("logged", ["quiet", "log"])
@pytest.mark.parametrize("kind", ["dev_zero", "fifo"])
def test_recording_code_named_after_a_device_or_a_pipe_reads_nothing(kind, logged, tmp_path):
    """Code compiled with the file name /dev/zero or a FIFO's: recording it (with and without the agdb.seq_nr
    logger) finishes at once, reads nothing (its peak memory stays small) and stores no line of it; in a
    subprocess of limited memory and time, where a regression fails instead of filling the machine."""
    target = "/dev/zero" if kind == "dev_zero" else str(tmp_path / "pipe.py")
    if kind == "fifo":
        os.mkfifo(target)
    try:
        done = run_isolated(_RECORD_NAMED, target, logged, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"recording code named {target} did not finish")
    peak = int(done.stdout.split("peak MB ")[1].split()[0]) if "peak MB " in done.stdout else None
    assert peak is not None and peak < 500, f"recording read the file: {peak} MB at the peak"
    assert done.returncode == 0, done.stderr[-800:]
    assert f"frames ['{target}'] stored {{}}" in done.stdout
