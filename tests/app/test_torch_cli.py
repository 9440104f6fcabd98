"""`agdb torch`, `--torch` and `agdb diff`: every shipped example gives the same trace on agdb's engine and on
real torch (node names, relative seq_nrs, culprit lines, execution order); diff finds and explains a shift."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from agdb import tracer
from agdb.app import torch_cli
from agdb.tracer.sources import torch as torch_bridge
from agdb.tracer.store import events as ev
from agdb.tracer.store.leaf_labels import stored_names
from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "docs" / "examples").glob("*.py"))


def _diff_json(a, b, capsys):
    code, out, err = agdb(["diff", a, b, "--json"], capsys)
    return code, json.loads(out)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_the_same_on_the_engine_and_on_real_torch(example, tmp_path, capsys):
    pytest.importorskip("torch")
    engine, real = tmp_path / "engine.agdb", tmp_path / "torch.agdb"
    code, engine_out, err = agdb(["record", "--as-torch", example, "-o", engine], capsys)
    assert code == 0, err
    code, torch_out, err = agdb(["torch", example, "-o", real], capsys)
    assert code == 0, err
    assert load(real).source == "torch" and load(engine).source == "engine"
    code, report = _diff_json(engine, real, capsys)
    assert report["equal"], report
    assert code == 0
    assert load(real).meta["divergences"] == []
    engine_nodes, real_nodes = _walked(load(engine)), _walked(load(real))
    assert real_nodes, "the bridge described no node's edges"
    for node, facts in real_nodes.items():
        assert engine_nodes.get(node) == facts, node
    assert _made_and_started(load(real)) == _made_and_started(load(engine))


def _made_and_started(trace):
    """The trace's node creations (name, thread, seq_nr relative to its thread's first) and graph task starts
    (reentrant depth), in order; AccumulateGrads left out: the bridge meets them at a backward's walk, the engine sees
    them made."""
    first = _first_seq_nrs(trace)
    thread = {row: k for k, row in enumerate(sorted(first))}
    out = []
    for e in trace:
        if isinstance(e, ev.NodeCreated) and not e.name.endswith("AccumulateGrad"):
            out.append((e.name, thread[e.thread], e.seq_nr - first[e.thread]))
        elif isinstance(e, ev.GraphTaskStarted):
            out.append(("graph task", e.reentrant_depth))
    return out


def _first_seq_nrs(trace):
    """The lowest seq_nr each thread's nodes took (AccumulateGrads take none): relative seq_nrs count from it, thread
    by thread, since each thread has a counter of its own (torch's reentrant pool thread keeps counting from one
    backward to the next in a process, and the engine's from another point)."""
    first: dict[int, int] = {}
    for i in range(trace.num_nodes):
        info = trace.node(i)
        if 0 <= info.seq_nr < 2**63:
            first[info.thread] = min(first.get(info.thread, info.seq_nr), info.seq_nr)
    return first


def _walked(trace):
    """Each node's next edges, topological_nr, input count and line, nodes known by name, thread (the k-th of the
    threads that took numbers: a source may give a thread that took none a row, and name the script's thread
    otherwise) and seq_nr relative
    to its thread's first (an AccumulateGrad, which has no number, by its leaf's name: both sources name a leaf by
    the path the user writes, NOTE [leaf names]), for the nodes whose edges the trace has (on the bridge: those a
    backward's walk met)."""
    first = _first_seq_nrs(trace)
    thread = {row: k for k, row in enumerate(sorted(first))}
    leaves = stored_names(trace)

    def known(i):
        info = trace.node(i)
        if 0 <= info.seq_nr < 2**63:
            return info.name, thread[info.thread], info.seq_nr - first[info.thread]
        return info.name, leaves.get(i)

    def facts(i):
        info = trace.node(i)
        edges = tuple((None if child is None else known(child), nr) for child, nr in info.next_edges)
        return edges, info.topological_nr, info.num_inputs, info.lineno, info.function

    return {known(i): facts(i) for i in range(trace.num_nodes) if trace.node(i).next_edges}


def test_a_leaf_no_line_made_is_shown_without_a_line():
    """On real torch an AccumulateGrad is met by the backward's walk, not made at a line: its sentence and its
    forward-to-backward row say no line, where they said `line 0`."""
    pytest.importorskip("torch")
    import torch

    from agdb.tracer.views.labels import NodeLabels
    from agdb.tracer.views.sentences import sentence
    from agdb.widgets.forward_backward import ForwardBackwardView

    x = torch.ones(2, requires_grad=True)
    with tracer.record("torch") as rec:
        (x * 2).sum().backward()
    trace = rec.trace
    made = {e.name: e for e in trace if isinstance(e, ev.NodeCreated)}
    labels = NodeLabels(trace)
    assert sentence(made["torch::autograd::AccumulateGrad"], labels).endswith("(seq_nr max, topo 0)")
    assert sentence(made["MulBackward0"], labels).endswith(f"at line {made['MulBackward0'].lineno}")
    view = ForwardBackwardView(trace)
    view.flag_width = 0  # the flags column's styles need a mounted app
    rows = {view.forward_map.op(i).op: view.row_text(i).plain for i in range(len(view.forward_map))}
    assert ":" not in rows["leaf"].split("→")[1], rows["leaf"]
    assert rows["mul"].rstrip().endswith(f"{made['MulBackward0'].lineno}: (x * 2).sum().backward()")


def test_examples_exist():
    assert len(EXAMPLES) >= 5


SCRIPT = textwrap.dedent("""\
    import torch
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = (y.sin() + y.cos()).sum()
    z.backward()
""")


def test_diff_finds_the_line_that_shifted_the_seq_nrs(tmp_path, capsys):
    pytest.importorskip("torch")
    before, after = tmp_path / "before.py", tmp_path / "model.py"
    before.write_text(SCRIPT)
    after.write_text(SCRIPT.replace("y = x.exp()\n", "y = x.exp()\nextra = x * 2\n"))
    agdb(["torch", before, "-o", tmp_path / "a.agdb"], capsys)
    agdb(["torch", after, "-o", tmp_path / "b.agdb"], capsys)
    code, out, _ = agdb(["diff", tmp_path / "a.agdb", tmp_path / "b.agdb"], capsys)
    assert code == 1
    assert "B took 1 more seq_nr(s) at relative 1 (MulBackward0 at model.py:4)" in out
    assert "extra = x * 2" in out
    code, report = _diff_json(tmp_path / "a.agdb", tmp_path / "b.agdb", capsys)
    assignment = report["aspects"]["seq_nr assignment"]
    assert code == 1 and assignment["first"]["shift"] == 1
    assert [b["source"] for b in assignment["first"]["inserted"]] == ["extra = x * 2"]
    # The two files' names differ, but each seq_nr both took is blamed on the same source line; the lines below
    # the new one moved down by one, which is said, not called a difference.
    lines = report["aspects"]["culprit lines"]
    assert lines["equal"] and "shifted by +1" in lines["summary"], lines
    # Every relative seq_nr after the extra one is one higher, which the assignment says: the runs are compared by
    # name, and the extra node never runs.
    order = report["aspects"]["execution order"]
    assert order["equal"] and "by name" in order["summary"], order


def test_diff_finds_a_node_whose_edges_changed(tmp_path, capsys):
    """`y * w` and `w * y` make the same nodes at the same numbers on the same line; only MulBackward0's edges
    swap: the graph edges aspect says so, at relative seq_nr 1, with both sides' edges."""
    pytest.importorskip("torch")
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(SCRIPT.replace("z = (y.sin() + y.cos()).sum()", "z = (y * x).sum()"))
    b.write_text(SCRIPT.replace("z = (y.sin() + y.cos()).sum()", "z = (x * y).sum()"))
    agdb(["torch", a, "-o", tmp_path / "a.agdb"], capsys)
    agdb(["torch", b, "-o", tmp_path / "b.agdb"], capsys)
    code, report = _diff_json(tmp_path / "a.agdb", tmp_path / "b.agdb", capsys)
    aspects = report["aspects"]
    assert code == 1 and aspects["node names"]["equal"] and aspects["seq_nr assignment"]["equal"]
    edges = aspects["graph edges"]
    assert not edges["equal"] and edges["first"]["seq_nr"] == 1, edges
    exp, leaf = {"thread": 0, "seq_nr": 0}, "AccumulateGrad"
    assert [e["node"] for e in edges["first"]["a"]] == [exp, leaf]
    assert [e["node"] for e in edges["first"]["b"]] == [leaf, exp]


def test_diff_of_a_trace_with_itself_is_equal(tmp_path, capsys):
    script = tmp_path / "m.py"
    script.write_text(SCRIPT)
    agdb(["record", "--as-torch", script, "-o", tmp_path / "a.agdb"], capsys)
    code, out, _ = agdb(["diff", tmp_path / "a.agdb", tmp_path / "a.agdb"], capsys)
    assert code == 0 and "the traces agree" in out


def test_diff_of_a_missing_file_says_so(tmp_path, capsys):
    code, _, err = agdb(["diff", tmp_path / "no.agdb", tmp_path / "no.agdb"], capsys)
    assert code == 1 and "no.agdb" in err and "Traceback" not in err


def test_culprits_of_a_real_torch_run(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    script = tmp_path / "m.py"
    script.write_text(SCRIPT)
    code, out, err = agdb(["culprits", "--torch", script], capsys, monkeypatch)
    assert code == 0, err
    assert "ExpBackward0" in out and "m.py:3" in out and "CosBackward0" in out and "m.py:4" in out


def test_a_failing_script_keeps_its_trace(tmp_path, capsys):
    pytest.importorskip("torch")
    script = tmp_path / "m.py"
    script.write_text(SCRIPT + "raise RuntimeError('late failure')\n")
    code, _, err = agdb(["torch", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 1 and "late failure" in err
    assert load(tmp_path / "t.agdb").num_nodes == 6


def test_without_torch_the_bridge_commands_say_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch_bridge, "available", lambda: False)
    script = tmp_path / "m.py"
    script.write_text(SCRIPT)
    code, _, err = agdb(["torch", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 1 and "pip install 'agdb[torch]'" in err
    assert not (tmp_path / "t.agdb").exists()
    for command in (["culprits", "--torch", script], ["tui", "--torch", script]):
        with pytest.raises(SystemExit) as info:  # argparse's usage error, before anything runs
            agdb(command, capsys)
        assert info.value.code == 2 and "pip install 'agdb[torch]'" in capsys.readouterr().err
    with pytest.raises(torch_bridge.TorchMissing, match="pip install"):
        with tracer.record("torch"):
            pass
    assert torch_cli.TORCH.name == "torch"


async def test_the_tui_opens_a_bridge_trace_and_says_where_the_model_diverged():
    """Every panel steps through a real torch run; a divergence in the trace is announced with its step."""
    pytest.importorskip("torch")
    from agdb.app.app import AgdbApp
    from agdb.app.screens.step import StepScreen
    from agdb.tracer import Trace
    from tests.tracer import torch_programs

    with tracer.record("torch") as rec:
        torch_programs.two_roots(lambda *tensors: None)
    trace = rec.trace
    meta = dict(trace.meta, divergences=[{"graph_task": 1, "step": 9, "expected": 1, "observed": 2}])
    app = AgdbApp(trace=Trace(trace.columns, list(trace.strings), meta))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)
        await pilot.press("G")
        for key in "12345678":
            await pilot.press(key)
            await pilot.pause()
        assert not [n for n in app._notifications if n.severity == "error"]
        warned = [n.message for n in app._notifications if n.severity == "warning"]
        assert any("step 9, graph task 1: the model expected" in m for m in warned), warned


def test_agdb_torch_says_when_the_model_diverged(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    script = tmp_path / "m.py"
    script.write_text(SCRIPT)
    monkeypatch.setattr(torch_bridge, "divergence_text", lambda trace: "step 3, graph task 1: the model expected A")
    code, _, err = agdb(["torch", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 0
    assert "disagree" in err and "  step 3, graph task 1: the model expected A\n" in err


def test_agdb_torch_says_what_the_execution_order_witness_found(tmp_path, capsys):
    """A script whose backward calls run with multithreading disabled: `agdb torch` says torch's execution order
    agreed in both graph tasks, and the trace keeps each verdict; without it, nothing is said, unless agdb torch
    runs the script with --single-threaded."""
    pytest.importorskip("torch")
    script = tmp_path / "m.py"
    script.write_text("import torch\nwith torch.autograd.set_multithreading_enabled(False):\n"
                      + textwrap.indent(SCRIPT + "z = (x * x).sum()\ntorch.autograd.grad(z, [x])\n", "    "))
    code, _, err = agdb(["torch", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 0, err
    assert "agrees with the observed order and agdb's model in 2 of 2 graph task(s)" in err
    tasks = load(tmp_path / "t.agdb").meta["graph_tasks"]
    assert [t["execution_order"] for t in tasks] == [{"length": 6, "model": "agrees", "observed": "agrees"},
                                                      {"length": 3, "model": "agrees", "observed": "agrees"}]
    script.write_text(SCRIPT)
    code, _, err = agdb(["torch", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 0 and "execution order" not in err
    code, _, err = agdb(["torch", "--single-threaded", script, "-o", tmp_path / "t.agdb"], capsys)
    assert code == 0 and "agrees with the observed order and agdb's model in 1 of 1 graph task(s)" in err


async def test_the_side_by_side_diff_screen_marks_and_finds_the_differences(tmp_path, capsys):
    from textual.widgets import DataTable

    from agdb.app.diff_app import DiffApp
    from agdb.tracer.replay.diff import compare, side_of
    from agdb.tracer.views.labels import NodeLabels

    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    before, after = tmp_path / "v1" / "model.py", tmp_path / "v2" / "model.py"  # two versions of one file
    before.write_text(SCRIPT)
    after.write_text(SCRIPT.replace("y = x.exp()\n", "y = x.exp()\nextra = x * 2\n"))
    for script, out in ((before, "a.agdb"), (after, "b.agdb")):
        code, _, err = agdb(["record", "--as-torch", script, "-o", tmp_path / out], capsys)
        assert code == 0, err
    a, b = (side_of(t, name, NodeLabels(t)) for t, name in ((load(tmp_path / "a.agdb"), "a"),
                                                             (load(tmp_path / "b.agdb"), "b")))
    app = DiffApp(a, b, compare(a, b))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bumps = app.query_one("#bumps", DataTable)
        assert bumps.row_count == 6  # B's 6 seq_nrs against A's 5
        # only the row where B took the extra number differs: the rows after it line up again
        assert app.differences["bumps"] == [1] and bumps.cursor_row == 1
        assert [str(c) for c in bumps.get_row_at(1)][1:4] == ["", "", ""]
        await pilot.press("d")
        assert bumps.cursor_row == 1
        runs = app.query_one("#runs", DataTable)
        # The same nodes ran in the same order; their relative seq_nrs differ by the shift the assignment shows,
        # so the runs are compared by name and none is marked.
        assert runs.row_count == 6 and app.differences["runs"] == []
        await pilot.press("q")
