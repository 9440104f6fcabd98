"""`agdb record / show / culprits` end to end on small scripts, `--as-torch`, and the agdb.state/1 JSON.

Every command runs through `agdb.app.cli.main(argv)` in a fresh thread, so the recorded script starts with a
sequence counter of 0 and an empty ready queue; expected values are worked out by hand from
docs/engine-semantics.md (§15 A for the diamond's order, §6.1 for priorities, §3.4 for dependency counts).
"""
from __future__ import annotations

import json
import sys
import textwrap

import pytest

from agdb.app.cli import main
from agdb.engine._state import UINT64_MAX
from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import load
from tests.app.show_text import table
from tests.engine.helpers import run_in_thread

DIAMOND = textwrap.dedent("""\
    from agdb import engine as torch

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = (y.sin() + y.cos()).sum()
    z.backward()
""")
# seq_nrs by hand (fresh counter): Exp 0, Sin 1, Cos 2, Add 3, Sum 4; AccumulateGrad 2**64-1.

SCHEMA_FIELDS = {"schema", "step", "num_steps", "event", "ready_queues", "dependencies", "not_ready", "executed",
                 "pruned", "running", "graph_tasks", "culprits"}


def agdb(argv, capsys, monkeypatch=None):
    """Run `agdb ARGV` in a fresh thread; (exit code, stdout, stderr)."""
    if monkeypatch is not None:
        monkeypatch.setenv("COLUMNS", "2000")
    code = run_in_thread(lambda: main([str(a) for a in argv]))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def diamond(tmp_path, capsys):
    """The diamond script recorded to diamond.agdb; returns (trace path, loaded trace)."""
    script = tmp_path / "diamond.py"
    script.write_text(DIAMOND)
    out = tmp_path / "diamond.agdb"
    code, _, err = agdb(["record", script, "-o", out], capsys)
    assert code == 0, err
    return out, load(out)


def node_id(trace, name: str) -> int:
    """The node-table index of the only node called `name`."""
    ids = [i for i in range(trace.num_nodes) if trace.node(i).name == name]
    assert len(ids) == 1, (name, ids)
    return ids[0]


def show_json(path, capsys, *extra) -> dict:
    code, out, err = agdb(["show", path, "--json", *extra], capsys)
    assert code == 0, err
    return json.loads(out)


# -- record ------------------------------------------------------------------------------------------------------
def test_record_writes_a_trace_of_what_the_script_did(diamond, capsys):
    """`agdb record` saves a trace whose nodes ran in the diamond's order (engine-semantics §15 A) with the hand-derived seq_nrs."""
    _, trace = diamond
    ran = [(e.node_name, trace.node(e.node).seq_nr) for e in trace if isinstance(e, ev.NodeStarted)]
    assert ran == [("SumBackward0", 4), ("AddBackward0", 3), ("CosBackward0", 2), ("SinBackward0", 1),
                   ("ExpBackward0", 0), ("torch::autograd::AccumulateGrad", UINT64_MAX)]
    assert [e.node_name for e in trace if isinstance(e, ev.SeqNrBumped)] == [
        "ExpBackward0", "SinBackward0", "CosBackward0", "AddBackward0", "SumBackward0"]


def test_record_reports_what_it_wrote(tmp_path, capsys):
    """`agdb record` exits 0 and says on stderr which file it wrote."""
    script = tmp_path / "s.py"
    script.write_text(DIAMOND)
    out = tmp_path / "s.agdb"
    code, stdout, err = agdb(["record", script, "-o", out], capsys)
    assert code == 0 and out.is_file()
    assert str(out) in err and "events" in err


def test_record_passes_script_arguments(tmp_path, capsys):
    """Arguments after SCRIPT, before or after -o, reach the script's sys.argv in order."""
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint('ARGV', sys.argv[1:])\n")
    code, out, err = agdb(["record", script, "alpha", "-o", tmp_path / "a.agdb", "beta"], capsys)
    assert code == 0, err
    assert "ARGV ['alpha', 'beta']" in out


@pytest.mark.parametrize("argv", [
    ["record", "{script}", "-o", "{out}", "--", "--lr", "0.1"],
    ["record", "-o", "{out}", "{script}", "--", "--lr", "0.1"],
    ["record", "{script}", "alpha", "-o", "{out}", "--", "--lr", "0.1"],
    ["record", "-o", "{out}", "{script}", "--", "--lr", "--", "0.1"],   # the script's own `--` stays
    ["record", "{script}", "-o", "{out}", "--", "--lr", "--", "0.1"],
])
def test_double_dash_separates_script_options(tmp_path, capsys, argv):
    """`--` ends agdb's options wherever it stands: the script gets exactly what follows it, not the `--` itself."""
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint('ARGV', sys.argv[1:])\n")
    argv = [a.format(script=script, out=tmp_path / "a.agdb") for a in argv]
    code, out, err = agdb(argv, capsys)
    assert code == 0, err
    expected = (["alpha"] if "alpha" in argv else []) + argv[argv.index("--") + 1:]
    assert f"ARGV {expected!r}" in out


def test_record_missing_script_is_a_clear_error(tmp_path, capsys):
    """Recording a script that does not exist exits non-zero with an `agdb:` error naming it."""
    code, _, err = agdb(["record", tmp_path / "nope.py", "-o", tmp_path / "x.agdb"], capsys)
    assert code != 0
    assert err.startswith("agdb:") and "nope.py" in err and "Traceback" not in err
    assert not (tmp_path / "x.agdb").exists()


def test_script_that_raises_shows_its_traceback_and_keeps_the_trace(tmp_path, capsys, monkeypatch):
    """A script raising ValueError: exit non-zero, its traceback (script line) on stderr, the trace so far saved."""
    script = tmp_path / "boom.py"
    script.write_text(textwrap.dedent("""\
        from agdb import engine as torch

        x = torch.tensor([1.0], requires_grad=True)
        y = (x * 2).sum()
        raise ValueError("boom at line 5")
    """))
    out = tmp_path / "boom.agdb"
    code, _, err = agdb(["record", script, "-o", out], capsys, monkeypatch)
    assert code != 0
    assert "Traceback" in err and "ValueError: boom at line 5" in err
    assert f'File "{script}", line 5' in err
    trace = load(out)
    assert [e.node_name for e in trace if isinstance(e, ev.SeqNrBumped)] == ["MulBackward0", "SumBackward0"]


def test_traceback_with_brackets_is_shown_verbatim_and_the_trace_kept(tmp_path, capsys, monkeypatch):
    """A script whose error text and source hold square brackets: agdb prints them verbatim and keeps the trace."""
    script = tmp_path / "brackets.py"
    script.write_text(textwrap.dedent("""\
        from agdb import engine as torch

        x = torch.ones(2, requires_grad=True)
        y = [x * 2, x * 3]
        raise KeyError(f"no entry [/bold] for {[len(y)]}")
    """))
    out = tmp_path / "brackets.agdb"
    code, _, err = agdb(["record", script, "-o", out], capsys, monkeypatch)
    assert code != 0
    assert 'raise KeyError(f"no entry [/bold] for {[len(y)]}")' in err
    assert "KeyError: 'no entry [/bold] for [2]'" in err
    assert [e.node_name for e in load(out) if isinstance(e, ev.SeqNrBumped)] == ["MulBackward0", "MulBackward0"]


def test_script_calling_sys_exit_nonzero_fails_and_keeps_the_trace(tmp_path, capsys):
    """sys.exit(3) in the script: agdb exits non-zero, says so, and still writes the trace."""
    script = tmp_path / "quit.py"
    script.write_text("import sys\nimport agdb.engine as torch\ny = torch.ones(2, requires_grad=True) * 2\nsys.exit(3)\n")
    out = tmp_path / "quit.agdb"
    code, _, err = agdb(["record", script, "-o", out], capsys)
    assert code != 0 and "3" in err
    assert [e.node_name for e in load(out) if isinstance(e, ev.SeqNrBumped)] == ["MulBackward0"]


# -- --as-torch ----------------------------------------------------------------------------------------------------
TORCH_SNIPPET = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F

    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = torch.tensor([0.5, 0.5, 0.5], requires_grad=True)
    y = F.relu(x * w).sum()
    y.backward()
    print("XGRAD", x.grad.tolist() == [0.5, 0.0, 0.5], "WGRAD", w.grad.tolist() == [1.0, 0.0, 3.0])
""")


def test_as_torch_runs_an_unchanged_pytorch_snippet(tmp_path, capsys):
    """With --as-torch, `import torch` and `import torch.nn.functional as F` get the engine and are recorded."""
    script = tmp_path / "snippet.py"
    script.write_text(TORCH_SNIPPET)
    out = tmp_path / "snippet.agdb"
    before = sys.modules.get("torch")
    code, stdout, err = agdb(["record", "--as-torch", script, "-o", out], capsys)
    assert code == 0, err
    # relu'(x * w) is 1 where x * w > 0: x.grad = w * mask = [0.5, 0, 0.5], w.grad = x * mask = [1, 0, 3]
    assert "XGRAD True WGRAD True" in stdout
    trace = load(out)
    ran = [e.node_name for e in trace if isinstance(e, ev.NodeStarted)]
    assert ran == ["SumBackward0", "ReluBackward0", "MulBackward0", "torch::autograd::AccumulateGrad",
                   "torch::autograd::AccumulateGrad"]
    assert sys.modules.get("torch") is before  # the shim is gone afterwards


def test_without_as_torch_import_torch_is_not_the_engine(tmp_path, capsys):
    """Without --as-torch the script's `import torch` is not redirected to the engine."""
    script = tmp_path / "which.py"
    script.write_text("import torch\nprint('AGDB_ENGINE', torch.__version__.endswith('+agdb'))\n")
    code, out, err = agdb(["record", script, "-o", tmp_path / "w.agdb"], capsys)
    assert "AGDB_ENGINE True" not in out


def test_as_torch_missing_attribute_names_it_and_keeps_the_trace(tmp_path, capsys, monkeypatch):
    """torch.fft under --as-torch fails with "agdb's engine has no torch.fft"; the trace so far is written."""
    script = tmp_path / "fft.py"
    script.write_text(textwrap.dedent("""\
        import torch

        x = torch.ones(4, requires_grad=True)
        y = (x * 2).sum()
        spectrum = torch.fft.fft(x)
    """))
    out = tmp_path / "fft.agdb"
    code, _, err = agdb(["record", "--as-torch", script, "-o", out], capsys, monkeypatch)
    assert code != 0
    assert "agdb's engine has no torch.fft" in err
    assert f'File "{script}", line 5' in err
    assert [e.node_name for e in load(out) if isinstance(e, ev.SeqNrBumped)] == ["MulBackward0", "SumBackward0"]


def test_as_torch_missing_submodule_attribute_names_it(tmp_path, capsys):
    """A missing attribute of a submodule (torch.nn.functional.gelu_new) is named with its full path."""
    script = tmp_path / "sub.py"
    script.write_text("import torch.nn.functional as F\nF.gelu_new\n")
    code, _, err = agdb(["record", "--as-torch", script, "-o", tmp_path / "sub.agdb"], capsys)
    assert code != 0
    assert "agdb's engine has no torch.nn.functional.gelu_new" in err


# -- show ----------------------------------------------------------------------------------------------------------
def _step_after_add_routes(trace) -> int:
    """The last step before the first pop that follows AddBackward0's NodeFinished (both children pushed)."""
    events = list(trace)
    finished = next(e.step for e in events if isinstance(e, ev.NodeFinished) and e.node_name == "AddBackward0")
    next_pop = next(e.step for e in events[finished:] if isinstance(e, ev.TaskPopped))
    return next_pop - 1


def test_show_json_has_every_schema_field(diamond, capsys):
    """`agdb show --json` prints one JSON object with every field of schema agdb.state/1."""
    path, trace = diamond
    data = show_json(path, capsys)
    assert SCHEMA_FIELDS <= set(data)
    assert data["schema"] == "agdb.state/1"
    assert isinstance(data["event"], dict) and "kind" in data["event"]
    for task in data["graph_tasks"]:
        assert {"graph_task", "reentrant_depth", "min_topo_nr", "needed", "captured"} <= set(task)


def test_show_json_after_add_routes_its_outputs(diamond, capsys):
    """After AddBackward0 runs: queue = Cos (0, 2) then Sin (0, 1); Exp waits on 2 parents, Acc(x) on 1."""
    path, trace = diamond
    step = _step_after_add_routes(trace)
    data = show_json(path, capsys, "--step", step)
    exp, acc = node_id(trace, "ExpBackward0"), node_id(trace, "torch::autograd::AccumulateGrad")
    cos, sin = node_id(trace, "CosBackward0"), node_id(trace, "SinBackward0")
    sum_, add = node_id(trace, "SumBackward0"), node_id(trace, "AddBackward0")
    assert data["step"] == step and data["num_steps"] == len(trace)
    assert data["event"]["kind"] == "TaskPushed" and data["event"]["node_name"] == "CosBackward0"
    assert data["event"]["priority"] == [0, 2]
    assert len(data["ready_queues"]) == 1
    queue = data["ready_queues"][0]
    assert set(queue) >= {"queue", "tasks"} and queue["queue"].startswith("cpu:")  # the thread's own CPU queue
    assert all(set(t) >= {"node", "name", "seq_nr", "priority", "graph_task"} for t in queue["tasks"])
    tasks = [{k: t[k] for k in ("node", "name", "seq_nr", "priority")} for t in queue["tasks"]]
    assert tasks == [{"node": cos, "name": "CosBackward0", "seq_nr": 2, "priority": [0, 2]},
                     {"node": sin, "name": "SinBackward0", "seq_nr": 1, "priority": [0, 1]}]
    assert data["dependencies"] == {str(exp): 2, str(acc): 1}
    assert data["not_ready"] == {}
    assert data["executed"] == [{"node": sum_, "name": "SumBackward0", "seq_nr": 4},
                                {"node": add, "name": "AddBackward0", "seq_nr": 3}]
    assert data["pruned"] == []
    assert data["running"] == []
    assert [{k: g[k] for k in ("reentrant_depth", "min_topo_nr", "needed", "captured")} for g in data["graph_tasks"]] \
        == [{"reentrant_depth": 0, "min_topo_nr": 0, "needed": [], "captured": []}]
    assert data["culprits"] == 5


def test_show_json_while_exp_waits_for_its_second_grad(diamond, capsys):
    """After Cos runs, Exp has one grad in its buffer (not_ready, slot filled) and one parent (Sin) left."""
    path, trace = diamond
    events = list(trace)
    cos_done = next(e.step for e in events if isinstance(e, ev.NodeFinished) and e.node_name == "CosBackward0")
    step = next(e.step for e in events[cos_done:] if isinstance(e, ev.TaskPopped)) - 1  # Cos's grad is written
    data = show_json(path, capsys, "--step", step)
    exp, acc = node_id(trace, "ExpBackward0"), node_id(trace, "torch::autograd::AccumulateGrad")
    assert data["dependencies"] == {str(exp): 1, str(acc): 1}
    assert data["not_ready"] == {str(exp): [True]}
    assert [t["name"] for t in data["ready_queues"][0]["tasks"]] == ["SinBackward0"]
    assert [e["name"] for e in data["executed"]] == ["SumBackward0", "AddBackward0", "CosBackward0"]


def test_show_json_running_node(diamond, capsys):
    """At a NodeStarted step the node is listed as running on the recording thread."""
    path, trace = diamond
    step = next(e.step for e in trace if isinstance(e, ev.NodeStarted) and e.node_name == "SinBackward0")
    data = show_json(path, capsys, "--step", step)
    assert [(r["node"], r["name"]) for r in data["running"]] == [(node_id(trace, "SinBackward0"), "SinBackward0")]
    assert data["running"][0]["thread"] == trace.threads[0][1]  # the only thread: the one that recorded
    assert data["executed"][-1]["name"] == "SinBackward0"


def test_show_default_step_is_the_last(diamond, capsys):
    """Without --step, show prints the last step: the finished graph task, every node executed, nothing left."""
    path, trace = diamond
    data = show_json(path, capsys)
    assert data["step"] == len(trace) - 1 == data["num_steps"] - 1
    assert data["event"]["kind"] == "GraphTaskFinished" and data["event"]["has_error"] is False
    assert [(e["name"], e["seq_nr"]) for e in data["executed"]] == [
        ("SumBackward0", 4), ("AddBackward0", 3), ("CosBackward0", 2), ("SinBackward0", 1), ("ExpBackward0", 0),
        ("torch::autograd::AccumulateGrad", UINT64_MAX)]
    assert data["dependencies"] == {} and data["not_ready"] == {} and data["graph_tasks"] == []
    assert all(q["tasks"] == [] for q in data["ready_queues"])
    assert data == show_json(path, capsys, "--step", len(trace) - 1)


def test_show_human_readable(diamond, capsys, monkeypatch):
    """Plain `agdb show --step K` prints the step, its event kind and sentence, the queue in pop order and the
    executed nodes, named as the TUI names them."""
    path, trace = diamond
    step = _step_after_add_routes(trace)
    code, out, err = agdb(["show", path, "--step", step], capsys, monkeypatch)
    assert code == 0, err
    assert f"step {step} of {len(trace) - 1}" in out and "TaskPushed" in out
    assert "CosBackward0 seq 2 pushed to ready queue" in out  # the TUI's status line
    assert [row[1] for row in table(out, f"ready queue {trace.queue_label(trace.queues[0])}: 2 task(s)")] == \
        ["CosBackward0", "SinBackward0"]
    assert "SumBackward0 seq 4 → AddBackward0 seq 3" in out


def test_show_says_what_runs_in_words(diamond, capsys, monkeypatch):
    """Plain `show` names the running node as every view does, and says `nothing` when none runs (no Python list)."""
    path, trace = diamond
    step = next(e.step for e in trace if isinstance(e, ev.NodeStarted) and e.node_name == "SinBackward0")
    code, out, _ = agdb(["show", path, "--step", step], capsys, monkeypatch)
    assert code == 0 and "running: SinBackward0 seq 1  culprits so far: 5" in out
    code, out, _ = agdb(["show", path], capsys, monkeypatch)
    assert code == 0 and "running: nothing  culprits so far: 5" in out and "[]" not in out


@pytest.mark.parametrize("bad", ["1000000", "-1", "LAST"])
def test_show_bad_step_is_a_clear_error(diamond, capsys, bad):
    """--step outside 0..N-1 (or not a number) is refused with a message, not a traceback."""
    path, trace = diamond
    if bad == "LAST":
        bad = str(len(trace))
    code, out, err = agdb(["show", path, "--step", bad], capsys)
    assert code != 0
    assert out == "" and "Traceback" not in err
    assert err.startswith("agdb:") and f"--step {bad}" in err and f"0..{len(trace) - 1}" in err


def test_show_non_integer_step_is_a_usage_error(diamond, capsys):
    """--step abc is an argparse usage error (exit status 2) naming the bad value."""
    path, _ = diamond
    with pytest.raises(SystemExit) as info:
        main(["show", str(path), "--step", "abc"])
    assert info.value.code == 2
    assert "invalid int value: 'abc'" in capsys.readouterr().err


def test_show_trace_with_no_events_is_a_clear_error(tmp_path, capsys):
    """A script that never touches the engine records 0 events; show says so instead of failing."""
    script = tmp_path / "nothing.py"
    script.write_text("print('hello')\n")
    out = tmp_path / "nothing.agdb"
    assert agdb(["record", script, "-o", out], capsys)[0] == 0
    code, stdout, err = agdb(["show", out], capsys)
    assert code != 0 and "holds no events" in err and "Traceback" not in err


# -- culprits ------------------------------------------------------------------------------------------------------
def test_culprits_on_an_80_column_terminal_keep_file_line_in_sight(tmp_path, capsys, monkeypatch):
    """A long source line does not squeeze the thread, file:line and function columns to nothing at 80 columns:
    file:line stays whole, the function column gives way, and the source is cut, not the table."""
    script = tmp_path / "long_line.py"
    script.write_text("import agdb.engine as torch\n"
                      "def attention(query_states, key_states):\n"
                      "    return (query_states * key_states.exp()).sum() / (query_states.numel() ** 0.5)\n"
                      "x = torch.ones(3, requires_grad=True)\n"
                      "attention(x, x)\n")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = agdb(["culprits", script], capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "│" in line]
    assert lines and all(len(line) <= 80 for line in out.splitlines()), out
    header = next(line for line in out.splitlines() if "seq_nr" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["seq_nr", "node", "thread", "file:line", "source"], out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if "→" in line]
    assert [r[1] for r in rows] == ["ExpBackward0", "MulBackward0", "SumBackward0", "DivBackward0"], out
    assert [r[3] for r in rows] == ["long_line.py:3"] * 4, out
    assert all(r[4].startswith("return (query_st") and r[4].endswith("…") for r in rows), out


def test_culprits_of_script_and_of_its_trace_agree(diamond, tmp_path, capsys, monkeypatch):
    """`agdb culprits diamond.py` and `agdb culprits diamond.agdb` list the same five increments by line."""
    path, _ = diamond
    rows = []
    for target in (tmp_path / "diamond.py", path):
        code, out, err = agdb(["culprits", target], capsys, monkeypatch)
        assert code == 0, err
        cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if "→" in line]
        rows.append([c[:2] + c[3:] for c in cells])  # all but the thread (each run has its own thread)
    assert rows[0] == rows[1]
    parsed = [(cells[0], cells[1], cells[2]) for cells in rows[0]]
    assert parsed == [("0 → 1", "ExpBackward0", "diamond.py:4"), ("1 → 2", "SinBackward0", "diamond.py:5"),
                      ("2 → 3", "CosBackward0", "diamond.py:5"), ("3 → 4", "AddBackward0", "diamond.py:5"),
                      ("4 → 5", "SumBackward0", "diamond.py:5")]


def test_culprits_write_node_names_as_every_panel_does(tmp_path, capsys, monkeypatch):
    """An in-place op on a view makes a CopySlices: the table says `CopySlices`, as the panels do, not the C++
    name `torch::autograd::CopySlices`."""
    script = tmp_path / "view.py"
    script.write_text("import agdb.engine as torch\n"
                      "a = torch.ones(3, requires_grad=True)\n"
                      "g = a.clone()\n"
                      "g[0:2].mul_(2)\n")
    code, out, err = agdb(["culprits", script], capsys, monkeypatch)
    assert code == 0, err
    names = [[c.strip() for c in line.split("│")[1:-1]][1] for line in out.splitlines() if "→" in line]
    assert names == ["CloneBackward0", "SliceBackward0", "MulBackward0", "CopySlices", "AsStridedBackward0"], out


def test_the_inspector_writes_seq_nr_max_in_priorities_and_no_line_for_a_leaf_met_by_a_walk():
    """An AccumulateGrad's priority reads `(depth, max)`, as seq_nrs do everywhere; a node the trace knows no line
    for says only what made it."""
    from agdb.tracer.recording.builder import TraceBuilder
    from agdb.tracer.replay.node_details import node_details
    from agdb.tracer.views.labels import NodeLabels
    from agdb.tracer.views.panel_text import detail_lines

    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    q = b.queue("cpu:0")
    b.node_created(thread=t, node=1, name="torch::autograd::AccumulateGrad", seq_nr=2**64 - 1, topological_nr=0)
    b.graph_task_started(thread=t, graph_task=1, graph_root=1, roots=((1, 0),))
    b.task_pushed(thread=t, graph_task=1, node=1, queue=q, seq_nr=2**64 - 1, queue_length=1)
    trace = b.finish()
    text = [line.text for line in detail_lines(NodeLabels(trace), node_details(trace, 0, len(trace) - 1))]
    assert any(line.endswith("with priority (0, max)") for line in text), text
    assert "made by leaf" in text[2] and "unknown" not in text[2] and " at " not in text[2], text


def test_culprits_of_a_failing_script_exit_non_zero(tmp_path, capsys, monkeypatch):
    """`agdb culprits` on a script that raises still lists the increments before the error and exits non-zero."""
    script = tmp_path / "fails.py"
    script.write_text("import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\ny = x * 2\n"
                      "raise RuntimeError('x')\n")
    code, out, err = agdb(["culprits", script], capsys, monkeypatch)
    assert code != 0
    assert "RuntimeError" in err
    assert "fails.py:3" in out and "MulBackward0" in out


def test_no_command_prints_help(capsys):
    """`agdb` with no command prints the usage and exits 2."""
    assert main([]) == 2
    assert "record" in capsys.readouterr().out
