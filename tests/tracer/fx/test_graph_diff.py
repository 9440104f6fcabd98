"""`agdb fx diff`: two captures of one program compared, on joint graphs written out by hand (the expected changes
are read off the edits each test makes), and the command on the engine's JSON and on saved traces."""
from __future__ import annotations

import json

from agdb.app.cli import main
from agdb.tracer.fx.graph import Graph
from agdb.tracer.fx.graph_diff import diff
from agdb.tracer.fx.graph_set import GraphEntry, GraphSet


def _joint() -> Graph:
    """x -> mul (seq 5) -> sin (seq 6) -> sum (seq 7); backward: expand (7), cos and mul_1 (6), mul_2 (5)."""
    g = Graph()
    x = g.placeholder("primals_1", meta={"partitioner_tag": "is_forward"})
    t = g.placeholder("tangents_1", meta={"partitioner_tag": "is_backward"})
    fw = {"partitioner_tag": "is_forward"}
    bw = {"partitioner_tag": "is_backward"}
    mul = g.create_node("call_function", "aten.mul.Tensor", (x, 2), name="mul",
                        meta={**fw, "seq_nr": 5, "custom": {"stage": 0}})
    sin = g.create_node("call_function", "aten.sin.default", (mul,), name="sin",
                        meta={**fw, "seq_nr": 6, "custom": {"stage": 1}})
    total = g.create_node("call_function", "aten.sum.default", (sin,), name="sum_1", meta={**fw, "seq_nr": 7})
    ex = g.create_node("call_function", "aten.expand.default", (t, [4]), name="expand", meta={**bw, "seq_nr": 7})
    cos = g.create_node("call_function", "aten.cos.default", (mul,), name="cos",
                        meta={**bw, "seq_nr": 6, "custom": {"stage": 1}})
    m1 = g.create_node("call_function", "aten.mul.Tensor", (ex, cos), name="mul_1",
                       meta={**bw, "seq_nr": 6, "custom": {"stage": 1}})
    m2 = g.create_node("call_function", "aten.mul.Tensor", (m1, 2), name="mul_2",
                       meta={**bw, "seq_nr": 5, "custom": {"stage": 0}})
    g.output([total, m2])
    return g


def _set(g: Graph) -> GraphSet:
    return GraphSet(graphs=[GraphEntry("c0.joint", "joint", None, 0, "joint", g)])


def _kinds(changes):
    return [(c.kind, c.nodes) for c in changes]


def test_the_same_capture_twice_has_no_change():
    assert diff(_set(_joint()), _set(_joint())) == []


def test_a_dropped_annotation_and_a_lost_seq_nr_are_named_per_node():
    b = _joint()
    b.node("mul_1").meta.pop("custom")
    del b.node("cos").meta["seq_nr"]
    found = _kinds(diff(_set(_joint()), _set(b)))
    assert ("annotation_dropped", ("mul_1",)) in found
    assert ("seq_nr_lost", ("cos",)) in found
    assert ("map_edges_lost", ("sin->cos",)) in found
    assert len(found) == 3


def test_a_retrace_that_loses_the_numbers_is_said_as_such():
    b = _joint()
    for n in b.nodes:
        if n.op == "call_function":
            n.meta["seq_nr"] = 7
    changes = diff(_set(_joint()), _set(b))
    (retraced,) = [c for c in changes if c.kind == "retraced"]
    assert "every node now has seq_nr 7: re-traced without preserve_node_seq_nr" in retraced.message
    assert not [c for c in changes if c.kind.startswith("seq_nr")]  # said once, not node by node
    gained = next(c for c in changes if c.kind == "map_edges_gained")
    assert "mul -> expand" in gained.message  # the map now sends every backward node to the first forward node


def test_a_uniform_shift_keeps_the_map():
    b = _joint()
    for n in b.nodes:
        if "seq_nr" in n.meta:
            n.meta["seq_nr"] += 3
    assert _kinds(diff(_set(_joint()), _set(b))) == [
        ("seq_nr_shifted_all", ("mul", "sin", "sum_1", "expand", "cos", "mul_1", "mul_2"))]


def test_command_compares_engine_captures_and_saved_traces(tmp_path, capsys):
    """`agdb fx diff` on a JSON report of the engine path and a trace saved with -o by a second capture in the same
    process (the engine's counter went on: every number 3 higher, the map the same), on two JSON reports, and on a
    file that is neither (one `agdb:` line, exit 1)."""
    script = tmp_path / "m.py"
    script.write_text("import torch\n\ndef f(x):\n    return (x * 2).sin().sum()\n\n"
                      "agdb_fx = (f, (torch.randn(4, requires_grad=True),))\n")
    assert main(["fx", str(script), "--json"]) == 0
    (tmp_path / "a.json").write_text(capsys.readouterr().out)
    assert main(["fx", str(script), "-o", str(tmp_path / "b.agdb")]) == 0
    capsys.readouterr()
    assert main(["fx", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.agdb")]) == 1
    out = capsys.readouterr().out
    assert "[seq_nr_shifted_all] c0.joint: every seq_nr moved by +3" in out and out.endswith("\n1 change\n")
    assert main(["fx", "diff", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
    assert "the metadata agrees" in capsys.readouterr().out
    data = json.loads((tmp_path / "a.json").read_text())
    for n in data["graph"]["nodes"]:
        if n["name"] == "cos":
            n["meta"]["dict"].pop("seq_nr")
    (tmp_path / "c.json").write_text(json.dumps(data))
    assert main(["fx", "diff", str(tmp_path / "a.json"), str(tmp_path / "c.json"), "--json"]) == 1
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert {"kind": "seq_nr_lost", "graph": "c0.joint", "nodes": ["cos"]}.items() <= changes[0].items()
    (tmp_path / "bad.json").write_text("{")
    assert main(["fx", "diff", str(tmp_path / "a.json"), str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agdb: ") and "bad.json: not JSON" in err and err.count("\n") == 1
