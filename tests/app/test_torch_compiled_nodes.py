"""A compiled region's backward node (CompiledFunctionBackward) is linked to the compile it belongs to: recorded with
the FX capture (`agdb fx --torch SCRIPT -o`), each such node of the trace names its compile's graphs, in the node
inspector and in `agdb show --node`. Checked against torch: which ops ran while each node ran (the program's own
hooks and dispatch mode) against the compiled function Dynamo named for that compile."""
from __future__ import annotations

import json

import pytest

from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

torch = pytest.importorskip("torch")

TWO_OPS = """
import json, sys
import torch
from torch.utils._python_dispatch import TorchDispatchMode

def f(x):
    return torch.sin(x).sum()

def g(x, w):
    return (torch.exp(x) @ w).sum()

torch.manual_seed(0)
x = torch.randn(3, 3, requires_grad=True)
w = torch.randn(3, 2, requires_grad=True)
cf = torch.compile(f, backend="aot_eager")
cg = torch.compile(g, backend="aot_eager")
(cf(x) + cg(x, w)).backward()  # compiles both, and their backward graphs on this first backward
ran, running = {}, []

class Ops(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if running:
            ran[running[-1]].append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))

def done(grads_in, grads_out):
    running.pop()

loss = cf(x) + cg(x, w)
stack, met = [loss.grad_fn], []
while stack:
    n = stack.pop()
    if n is None or n in met:
        continue
    met.append(n)
    if n.name() == "CompiledFunctionBackward":
        seq = n._sequence_nr()
        ran[seq] = []
        n.register_prehook(lambda grads, seq=seq: running.append(seq))
        n.register_hook(done)
    stack.extend(c for c, _ in n.next_functions)
with Ops():
    loss.backward()
json.dump({str(k): v for k, v in ran.items()}, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """`agdb fx --torch TWO_OPS -o`: (the trace, seq_nr -> the aten ops torch ran while that CompiledFunctionBackward
    ran in the program's last backward, as its own hooks and dispatch mode saw them)."""
    from tests.app.test_torch_compile_time_cli import _run

    folder = tmp_path_factory.mktemp("compiled")
    script, out, ops = folder / "two_ops.py", folder / "two_ops.agdb", folder / "ops.json"
    script.write_text(TWO_OPS)
    torch._dynamo.reset()
    try:
        code, _, err = _run(["fx", "--torch", script, "-o", out, "--", ops])
    finally:
        torch._dynamo.reset()
    assert code == 0, err
    return load(out), {int(k): v for k, v in json.loads(ops.read_text()).items()}


def _compiled_nodes(trace) -> list[int]:
    return [i for i in range(trace.num_nodes) if trace.node_name(i) == "CompiledFunctionBackward"]


def test_each_compiled_function_node_is_linked_to_the_compile_whose_backward_ran(recorded):
    """Every CompiledFunctionBackward of both steps names a compile; in the step the program watched, the node whose
    backward ran cos (sin's derivative) belongs to f's compile, the one that ran mm (the matmul's) to g's."""
    from agdb.tracer.views.compiled import compile_of_node

    trace, ran = recorded
    nodes = _compiled_nodes(trace)
    assert len(nodes) == 4  # two compiled functions, two steps
    linked = {n: compile_of_node(trace, n) for n in nodes}
    assert all(c is not None for c in linked.values())
    watched = {n: ran[trace.node(n).seq_nr] for n in nodes if trace.node(n).seq_nr in ran}
    assert len(watched) == 2
    for n, ops in watched.items():
        function = linked[n]["function"]
        assert ("cos" in ops, "mm" in ops) == ((True, False) if function == "f" else (False, True)), (function, ops)
    assert {linked[n]["function"] for n in watched} == {"f", "g"}
    assert {linked[n]["index"] for n in nodes} == {0, 1}


def test_inspector_and_show_name_the_compiled_graphs(recorded, tmp_path, capsys, monkeypatch):
    """The node inspector's lines (which `agdb show --node` prints) say `compiled graph cN: cN.forward /
    cN.backward` for a CompiledFunctionBackward, and nothing of the kind for another node."""
    from agdb.tracer.replay.node_details import node_details
    from agdb.tracer.views.compiled import compile_of_node
    from agdb.tracer.views.labels import NodeLabels
    from agdb.tracer.views.panel_text import detail_lines

    trace, _ = recorded
    node = _compiled_nodes(trace)[0]
    c = compile_of_node(trace, node)["index"]
    lines = [line.text for line in detail_lines(NodeLabels(trace), node_details(trace, node, len(trace) - 1))]
    assert any(line.startswith(f"compiled graph c{c}: c{c}.forward / c{c}.backward") for line in lines), lines
    other = next(i for i in range(trace.num_nodes) if trace.node_name(i) == "AddBackward0")
    assert not any("compiled graph" in line.text for line in detail_lines(NodeLabels(trace), node_details(
        trace, other, len(trace) - 1)))
    path = tmp_path / "t.agdb"
    from agdb.tracer.store.tracefile import save

    save(trace, path, durable=False)
    code, out, _ = agdb(["show", path, "--node", node], capsys, monkeypatch)
    assert code == 0
    assert f"compiled graph c{c}: c{c}.forward / c{c}.backward" in out


async def test_enter_on_the_compiled_graph_line_opens_that_compile_s_joint_graph(recorded):
    """In the TUI, Enter on the inspector's "compiled graph cN" line of g's node shows c1's joint graph (exp and mm,
    the ops g runs) in the Joint panel, and on f's node c0's (sin and cos); the Joint panel opened first shows the
    trace's first joint graph, as before."""
    from agdb.app.app import AgdbApp
    from agdb.tracer.views.compiled import compile_of_node
    from agdb.widgets.joint_graph import JointGraphView
    from agdb.widgets.node_inspector import NodeInspector
    from tests.app.pilot import opened

    trace, _ = recorded
    app = AgdbApp(trace=trace, title="compiled")
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await opened(app, pilot)
        joint = screen.query_one(JointGraphView)
        assert joint.graph_id == "" and joint.nodes
        seen = {}
        for node in _compiled_nodes(trace)[:2]:
            screen.selected_node = node
            await pilot.pause()
            inspector = screen.query_one(NodeInspector)
            assert inspector.compile_row is not None
            inspector.focus()
            inspector.cursor = inspector.compile_row
            await pilot.press("enter")
            await pilot.pause()
            c = compile_of_node(trace, node)
            assert joint.graph_id == f"c{c['index']}.joint"
            seen[c["function"]] = {n.name for n in joint.nodes}
        assert {"sin", "cos"} <= seen["f"] and not {"exp", "mm"} & seen["f"]
        assert {"exp", "mm"} <= seen["g"] and not {"sin", "cos"} & seen["g"]


def test_agdb_torch_fx_links_the_nodes_as_agdb_fx_o_does(recorded, tmp_path):
    """`agdb torch --fx` records the same run with the graphs: its CompiledFunctionBackward nodes, in the order they
    took their numbers, name the same compiled functions as in `agdb fx --torch -o`'s trace, whose links the ops
    torch ran confirmed; without --fx the nodes still carry their aot_id, and the inspector says how to get the
    graphs."""
    from agdb.tracer.views.compiled import compile_of_node, compiled_graph_lines
    from tests.app.test_torch_compile_time_cli import _run

    trace, _ = recorded
    script = tmp_path / "two_ops.py"
    script.write_text(TWO_OPS)
    out, said = {}, {}
    for flag in ("--fx", None):
        path = tmp_path / f"{flag or 'plain'}.agdb"
        torch._dynamo.reset()
        try:
            code, _, said[flag] = _run(["torch", *([flag] if flag else []), script, "-o", path, "--",
                                        tmp_path / "ops.json"])
        finally:
            torch._dynamo.reset()
        assert code == 0, said[flag]
        out[flag] = load(path)
    assert "agdb: kept the joint graph c0.joint with 0 subgraphs (the first of 2 compiles" in said["--fx"]

    def functions(t) -> list:
        nodes = sorted(_compiled_nodes(t), key=lambda n: t.node(n).seq_nr)
        return [compile_of_node(t, n).get("function") for n in nodes]

    assert functions(out["--fx"]) == functions(trace) == ["f", "g", "f", "g"]
    plain = out[None]
    node = _compiled_nodes(plain)[0]
    assert set(compile_of_node(plain, node)) == {"aot_id"}
    assert compiled_graph_lines(plain, node)[0].startswith("compiled region of AOTAutograd compile ")
