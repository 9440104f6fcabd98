"""`agdb culprits --torch` on a script whose worker threads run the forward and backward: every worker's
increments, on its line and thread, as torch's own counter on that thread saw them; `agdb diff` of the engine's
trace and the bridge's of the same script finds them equal."""
from __future__ import annotations

import json
import re
import textwrap

import pytest

from agdb.tracer.store.schema import Kind
from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

SCRIPT = textwrap.dedent("""\
    import json, sys, threading
    import torch
    seen = {}
    def work(scale):
        x = torch.ones(3, requires_grad=True)
        a = torch.autograd._get_sequence_nr()
        y = (x * scale).exp()
        b = torch.autograd._get_sequence_nr()
        loss = y.sum()
        c = torch.autograd._get_sequence_nr()
        seen[threading.current_thread().name] = [[7, a, b], [9, b, c]]
        loss.backward()
    for i in range(2):
        t = threading.Thread(target=work, args=(i + 2,), name=f"worker-{i}")
        t.start()
        t.join()
    json.dump(seen, open(sys.argv[1], "w"))
""")
ROW = re.compile(r"│\s*(\d+) → \d+\s*│\s*(\S+)\s*│\s*(\S+)\s*│\s*m\.py:(\d+)")


@pytest.mark.parametrize("columns", ["60", "200"])
def test_culprits_of_worker_threads_carry_their_thread_and_torch_s_numbers(tmp_path, capsys, monkeypatch, columns):
    """Each row names the worker whose counter moved, at each width (the thread column never gives way when
    there are several); the numbers and lines are those the script read from torch's counter on that thread."""
    pytest.importorskip("torch")
    script, truth = tmp_path / "m.py", tmp_path / "truth.json"
    script.write_text(SCRIPT)
    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = agdb(["culprits", "--torch", script, truth], capsys)
    assert code == 0, err
    found = [(thread, int(line), int(old)) for old, _node, thread, line in ROW.findall(out)]
    expected = [(name, line, s) for name, lines in json.loads(truth.read_text()).items()
                for line, lo, hi in lines for s in range(lo, hi)]
    assert found == expected
    assert {name for name, _, _ in expected} == {"worker-0", "worker-1"}


def test_the_engine_and_the_bridge_agree_on_a_threaded_script(tmp_path, capsys):
    """The engine's trace and real torch's of the same threaded script: equal on every aspect, the threads
    aligned in the order they first took a number, by the same names."""
    pytest.importorskip("torch")
    script = tmp_path / "m.py"
    script.write_text(SCRIPT)
    engine, real = tmp_path / "engine.agdb", tmp_path / "torch.agdb"
    code, _, err = agdb(["record", "--as-torch", script, tmp_path / "e.json", "-o", engine], capsys)
    assert code == 0, err
    code, _, err = agdb(["torch", script, tmp_path / "t.json", "-o", real], capsys)
    assert code == 0, err
    code, out, err = agdb(["diff", engine, real, "--json"], capsys)
    report = json.loads(out)
    assert report["equal"] and code == 0, report
    for path in (engine, real):
        trace = load(path)
        bumped = {trace.threads[trace[int(s)].thread][1] for s in trace.steps_of(Kind.SEQ_NR_BUMPED)}
        assert bumped == {"worker-0", "worker-1"}
