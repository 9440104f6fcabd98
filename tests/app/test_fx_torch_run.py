"""`agdb fx --torch SCRIPT`: the graphs of the script's own torch.compile run, checked against what torch's own
compilers receive in the same run (a recording backend of the test's), and the JSON against its schema."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agdb.app.cli import main
from agdb.tracer.sources import torch as torch_bridge

needs_torch = pytest.mark.skipif(not torch_bridge.available(), reason="torch is not installed")
SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "fx-graphs.schema.json"

NESTED = '''import json, sys
import torch
import torch.fx.traceback as fx_traceback
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import default_partition, make_boxed_func

torch._dynamo.config.inline_single_use_invoke_subgraph = False
received = []


def keep(gm, example_inputs):
    received.append({name: [[n.name, n.meta.get("seq_nr"), n.meta.get("partitioner_tag"),
                             bool(n.meta.get("is_gradient_acc")), n.meta.get("custom")] for n in m.graph.nodes]
                     for name, m in gm.named_modules() if isinstance(m, torch.fx.GraphModule)})
    return make_boxed_func(gm.forward)


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.sin(x @ w).relu()


def f(x, w1, w2):
    with fx_traceback.annotate({"stage": 0}):
        y = block(x, w1)
    with fx_traceback.annotate({"stage": 1}):
        z = block(y, w2) * 2
    return z.cos().sum()


DROP = sys.argv[2:] == ["drop"]


def drop_one_annotation(gm, inputs):
    for n in gm.graph.nodes:
        if n.meta.get("partitioner_tag") == "is_backward" and n.op == "call_function" and n.meta.get("custom"):
            n.meta.pop("custom", None)
            break
    return gm


if DROP:
    torch._functorch.config.joint_custom_pass = drop_one_annotation
backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, partition_fn=default_partition)
torch.manual_seed(0)
x, w1, w2 = (torch.randn(4, 4, requires_grad=True) for _ in range(3))
torch.compile(f, backend=backend)(x, w1, w2).backward()
with open(sys.argv[1], "w") as out:
    json.dump(received, out)
'''


def _run(tmp_path, capsys, *extra):
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    seen = tmp_path / "received.json"
    status = main(["fx", "--torch", str(script), "--json", "--", str(seen), *extra])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out), json.loads(seen.read_text())


def _node_rows(graph):
    return [[n["name"], n["meta"]["seq_nr"], n["meta"]["partitioner_tag"], n["meta"]["is_gradient_acc"],
             n["meta"]["custom"]] for n in graph["nodes"]]


@needs_torch
def test_every_graph_the_compilers_receive_is_reported_with_torchs_meta(tmp_path, capsys):
    """The script runs unchanged with its own backend; agdb's report holds each graph that backend's compilers got
    (and each subgraph in it) with the same node names, seq_nr, partitioner_tag, is_gradient_acc and custom; the
    joint graph and its subgraphs come first, with parents; the JSON matches docs/fx-graphs.schema.json."""
    import jsonschema

    data, received = _run(tmp_path, capsys)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    graphs = {g["id"]: g for g in data["graphs"]}
    assert [(g["kind"], g["parent"]) for g in data["graphs"] if g["id"].startswith("c0.joint")][0] == ("joint", None)
    joint_subgraphs = [g for g in data["graphs"] if g["parent"] == "c0.joint"]
    assert joint_subgraphs and all(g["kind"] == "subgraph" for g in joint_subgraphs)
    assert len(received) == 2  # the forward graph, then the backward graph
    for kind, modules in zip(("forward", "backward"), received, strict=True):
        for name, rows in modules.items():
            graph_id = f"c0.{kind}" + (f"/{name}" if name else "")
            assert _node_rows(graphs[graph_id]) == rows, graph_id
    assert data["compiles"][0]["compile_id"] == "0/0" and data["compiles"][0]["function"] == "f"
    kinds = {a["kind"] for a in data["anomalies"]}
    assert not kinds & {"annotation", "no_forward", "retraced"}, data["anomalies"]


@needs_torch
def test_a_pass_that_drops_a_backward_nodes_annotation_is_named(tmp_path, capsys):
    """A joint pass (torch._functorch.config.joint_custom_pass, run after agdb took the joint graph) drops `custom`
    from one backward node: the forward and backward graphs show it, and the report names that node, its forward
    partner and the annotation it lost."""
    data, received = _run(tmp_path, capsys, "drop")
    holes = [a for a in data["anomalies"] if a["kind"] == "annotation"]
    assert len(holes) == 1, data["anomalies"]
    (hole,) = holes
    backward = next(g for g in data["graphs"] if g["id"] == "c0.backward")
    joint = next(g for g in data["graphs"] if g["id"] == "c0.joint")
    annotated = {n["name"] for n in joint["nodes"] if n["meta"]["partitioner_tag"] == "is_backward"
                 and n["meta"]["custom"]}
    dropped = [n["name"] for n in backward["nodes"] if n["name"] in annotated and n["meta"]["custom"] is None]
    assert len(dropped) == 1 and hole["graph"] == "c0.backward" and hole["nodes"][0] == dropped[0]
    assert "lacks custom['stage']" in hole["message"]


@needs_torch
def test_text_report_nests_subgraphs_under_their_graph(tmp_path, capsys):
    """The text report: the compile with Dynamo's id and frame, its graphs listed, the joint graph with its
    subgraphs indented under it, the map across them, and the anomalies."""
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    assert main(["fx", "--torch", str(script), "--", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "== compile 0 [0/0] (f in " in out
    assert "  joint graph c0.joint: " in out and "; subgraphs " in out
    assert "\n    subgraph repeated_subgraph" in out and "\n    class repeated_subgraph" in out
    assert "custom={'stage': 1}" in out
    assert "forward -> backward (by seq_nr, c0.joint and its subgraphs" in out


@needs_torch
def test_a_script_that_compiles_nothing_says_so_in_one_line(tmp_path, capsys):
    script = tmp_path / "eager.py"
    script.write_text("import torch\nx = torch.randn(3, requires_grad=True)\n(x * 2).sum().backward()\n")
    assert main(["fx", "--torch", str(script)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agdb: ") and "compiled nothing" in err and err.count("\n") == 1


@needs_torch
async def test_output_file_keeps_the_run_and_its_joint_graph_with_subgraphs(tmp_path, capsys):
    """-o on a script's own compiles records the same run with the bridge and saves it with the first joint graph
    and its subgraphs: `agdb export --view joint` draws each subgraph as a cluster with the nodes' custom
    annotations, and the TUI's joint panel lists the subgraphs' nodes beside the recorded run."""
    from agdb.app.app import AgdbApp
    from agdb.tracer.store.tracefile import load
    from agdb.widgets.joint_graph import JointGraphView

    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    saved = tmp_path / "out.agdb"
    assert main(["fx", "--torch", str(script), "-o", str(saved), "--", str(tmp_path / "r.json")]) == 0
    captured = capsys.readouterr()
    assert "== compile 0" in captured.out
    assert f"wrote {saved}: the bridge's trace of the run (" in captured.err and "joint graph c0.joint with " in \
        captured.err
    dot = tmp_path / "j.dot"
    assert main(["export", str(saved), "--view", "joint", "-o", str(dot)]) == 0
    text = dot.read_text()
    data, _ = _run(tmp_path, capsys)
    subgraphs = [g["name"] for g in data["graphs"] if g["parent"] == "c0.joint"]
    assert subgraphs and all(f'label="subgraph {name}"' in text for name in subgraphs)
    assert "custom stage=1" in text
    trace = load(saved)
    assert len(trace) > 0 and trace.meta["graph_tasks"]
    app = AgdbApp(trace=trace, title="nested")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("9")
        await pilot.pause()
        names = [view_name for view_name in app.screen.query_one(JointGraphView).names.values()]
        assert any(name.startswith(f"{subgraphs[-1]}.") for name in names)


SCALE = '''import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, flag):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None, None


def f(x):
    return Scale.apply(x.sin(), 3.0, True).sum()


torch.compile(f, backend="aot_eager")(torch.randn(4, requires_grad=True)).backward()
'''


@needs_torch
def test_python_op_groups_a_custom_functions_ops_by_call_site(tmp_path, capsys):
    """--python-op on a script's own graphs: the Function's forward op becomes PythonOp (name Scale, 3.0 and True
    classified at positions 1 and 2, as seed 002's exporter does) and its backward op PythonOpGrad, fed by the
    values that fed the ops they replace; without it, the same run shows torch's untagged backward op, reported
    with the line torch recorded for it (the Function's backward)."""
    script = tmp_path / "scale.py"
    script.write_text(SCALE)
    assert main(["fx", "--torch", str(script), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    joint = plain["graphs"][0]["nodes"]
    untagged = [n["name"] for n in joint if n["op"] == "call_function" and n["meta"]["partitioner_tag"] is None]
    assert len(untagged) == 1
    (hole,) = [a for a in plain["anomalies"] if a["kind"] == "untagged"]
    assert hole["nodes"] == untagged
    assert (hole["line"]["function"], hole["line"]["code"]) == ("backward", "return g * ctx.k, None, None")
    assert main(["fx", "--torch", str(script), "--json", "--python-op"]) == 0
    data = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in data["graphs"][0]["nodes"]}
    op, grad = nodes["PythonOp"], nodes["PythonOpGrad"]
    assert op["kwargs"]["dict"] == {"name": "Scale", "input_float_scalars": [3.0],
                                    "input_float_scalars_positions": [1], "input_bool_scalars": [True],
                                    "input_bool_scalars_positions": [2]}
    assert op["args"] == {"tuple": [{"node": "sin"}]} and grad["kwargs"]["dict"] == {"name": "Scale"}
    mul_fwd = next(n for n in joint if n["meta"]["partitioner_tag"] == "is_forward"
                   and n["target"] == "aten.mul.Tensor")
    assert op["meta"]["agdb"]["inner"] == [mul_fwd["name"]] and grad["meta"]["agdb"]["inner"] == untagged
    sin = next(n for n in joint if n["name"] == "sin")  # numbers differ between the two runs: compare offsets
    assert op["meta"]["seq_nr"] - nodes["sin"]["meta"]["seq_nr"] == mul_fwd["meta"]["seq_nr"] - sin["meta"]["seq_nr"]


COND = '''import torch


def f(x):
    y = x * 2
    return torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos() * 2, (y,)).sum()


torch.compile(f, backend="aot_eager")(torch.randn(4, requires_grad=True)).backward()
'''


@needs_torch
def test_torch_frames_name_where_torch_took_a_number_no_forward_node_has(tmp_path, capsys):
    """torch.cond's backward branches carry a number no forward node has (their annotations are lost); with
    --torch-frames, each such anomaly names the frames in flight when torch took that number: cond's autograd
    machinery re-running the branch (torch/_higher_order_ops). Without the flag, nothing is watched."""
    script = tmp_path / "cond.py"
    script.write_text(COND)
    assert main(["fx", "--torch", str(script), "--json", "--torch-frames"]) == 0
    import jsonschema

    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    holes = [a for a in data["anomalies"] if a["kind"] == "no_forward"]
    assert holes and all(a["taken_by"] for a in holes)
    assert all(any(f["file"].startswith("torch/_higher_order_ops/") for f in a["taken_by"]) for a in holes)
    assert str(holes[0]["seq_nr"]) in data["takers"]
    assert main(["fx", "--torch", str(script), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "takers" not in plain and all("taken_by" not in a for a in plain["anomalies"])
