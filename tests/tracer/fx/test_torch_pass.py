"""check_pass and compile_joint on graphs of torch's ops (tracer/sources/torch/fx_runner.py, fx_compile.py), on joint
graphs real torch 2.13 made: aot_function's, aot_export_joint_with_descriptors' (a module) and a torch.compile run's
own (capture_run). Truth is torch's: the `val` its tracer recorded, its op schemas, its eager gradients."""
from __future__ import annotations

import pytest

from agdb import engine
from agdb.tracer import check_pass, compile_joint
from agdb.tracer.fx import capture_joint, from_data, to_data
from agdb.tracer.fx import check_pass as fx_check_pass
from agdb.tracer.fx import compile as fx_compile
from agdb.tracer.fx.check_pass import EngineRunner
from agdb.tracer.fx.descriptors import (
    GradAOTOutput,
    OtherAOTOutput,
    ParamAOTInput,
    PlainAOTInput,
    PlainAOTOutput,
    TangentAOTInput,
    descriptor_from_text,
)
from agdb.tracer.fx.graph import Graph
from agdb.tracer.fx.interpret import NotRunnable

torch = pytest.importorskip("torch")

from agdb.tracer.sources.fx import default_runner  # noqa: E402
from agdb.tracer.sources.torch import fx as torch_fx  # noqa: E402
from agdb.tracer.sources.torch.fx_run import capture_run  # noqa: E402
from agdb.tracer.sources.torch.fx_runner import TorchRunner, to_graph_module  # noqa: E402


def f(x, w):
    """Two outputs, the second a view (y.t()), and a factory with a dtype and a device in its kwargs."""
    y = x * 2
    return (y @ w).sin().sum() + torch.ones(5, dtype=torch.float64).sum(), y.t()


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return (self.lin2(self.lin1(x).relu()) * 2).sum()


def _leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


@pytest.fixture(scope="module")
def graphs():
    """name -> (joint graph, the callable it was traced from, its arguments in the joint's primal order)."""
    torch.manual_seed(0)
    x, w = _leaf(3, 4), _leaf(4, 5)
    mlp = MLP()
    xm = torch.randn(5, 4)
    compiled_mlp = MLP()
    with capture_run() as found:
        torch.compile(compiled_mlp, backend="aot_eager")(xm).backward()
    run_joint = found.roots("joint")[0].graph
    return {
        "aot_function": (torch_fx.capture(f, x, w).joint, f, (x, w)),
        "module": (torch_fx.capture(mlp, xm).joint, lambda *a: torch.func.functional_call(
            mlp, dict(zip([n for n, _ in mlp.named_parameters()], a[:-1], strict=True)), (a[-1],)),
            tuple(p.detach().requires_grad_() for p in mlp.parameters()) + (xm,)),
        "compile_run": (run_joint, lambda w1, b1, x_, w2, b2: torch.func.functional_call(
            compiled_mlp, {"lin1.weight": w1, "lin1.bias": b1, "lin2.weight": w2, "lin2.bias": b2}, (x_,)),
            _dynamo_order(run_joint, compiled_mlp, xm)),
    }


def _dynamo_order(joint, mlp, x):
    """The compiled module's inputs in the order Dynamo made them the joint's primals (by first use: lin1's
    parameters, x, lin2's), checked against the placeholders' shapes."""
    args = (mlp.lin1.weight, mlp.lin1.bias, x, mlp.lin2.weight, mlp.lin2.bias)
    args = tuple(a.detach().requires_grad_(a.requires_grad) for a in args)
    primals = [n for n in joint.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    assert [n.meta["val"]["shape"] for n in primals] == [list(a.shape) for a in args]
    return args


def found(violations):
    return [(v.kind, v.node) for v in violations]


def check(g, pass_fn):
    return check_pass(g, pass_fn, runner=TorchRunner(g))


def move_after(g, node, anchor):
    g.nodes.remove(node)
    g.nodes.insert(g.nodes.index(anchor) + 1, node)


# -- the runner ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["aot_function", "module", "compile_run"])
def test_fake_run_recomputes_torchs_own_val(graphs, name):
    """Every node's shape, stride and dtype on fake tensors equal what torch's tracer recorded in `val`, and values
    sharing storage in torch's graph share it in the run (views: y.t(), t of a weight)."""
    g = graphs[name][0]
    values = TorchRunner(g).run(g)
    storage_pairs, n_checked = [], 0
    for n in g.nodes:
        if n.op == "output" or not isinstance(n.meta.get("val"), dict):
            continue
        got, want = values[n.name], n.meta["val"]
        assert {k: got[k] for k in ("shape", "stride", "dtype")} == {k: want[k] for k in ("shape", "stride", "dtype")}
        storage_pairs.append((want["storage"], got["storage"]))
        n_checked += 1
    assert n_checked >= 8
    ours = {}
    for theirs, mine in storage_pairs:  # the same partition of nodes into storages, whatever the numbers
        assert ours.setdefault(theirs, mine) == mine
    assert len(set(ours.values())) == len(ours)


def test_mutation_is_read_from_the_schema():
    """`aten.add.out` writes into `out` though its name has no trailing `_`; a view or getitem writes nothing."""
    g = Graph()
    x = g.placeholder("x")
    nodes = {t: g.create_node("call_function", t, (x,)) for t in ("aten.add_.Tensor", "aten.add.out",
                                                                  "aten.add.Tensor", "aten._unsafe_view.default",
                                                                  "aten.copy_.default", "getitem")}
    runner = TorchRunner(g)
    assert {t: runner.mutates(n) for t, n in nodes.items()} == {
        "aten.add_.Tensor": True, "aten.add.out": True, "aten.add.Tensor": False, "aten._unsafe_view.default": False,
        "aten.copy_.default": True, "getitem": False}


def test_graph_module_keeps_names_and_resolves_text_arguments(graphs):
    """The rebuilt GraphModule calls torch.ops, with the dtype and device back as torch objects."""
    g = graphs["aot_function"][0]
    gm, nodes = to_graph_module(g)
    ones = nodes["ones"]
    assert ones.target is torch.ops.aten.ones.default
    assert ones.kwargs["dtype"] is torch.float64 and ones.kwargs["device"] == torch.device("cpu")
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["primals_1", "primals_2", "tangents_1",
                                                                          "tangents_2"]


def nested_graph():
    """A joint calling a nested region, as torch 2.13 writes it (the subgraph itself is not in the plain graph)."""
    g = Graph()
    x = g.placeholder("x", {"val": {"shape": [3], "stride": [1], "dtype": "float32", "storage": 0}})
    sub = g.create_node("get_attr", "repeated_subgraph0", name="repeated_subgraph0")
    call = g.create_node("call_function", "invoke_subgraph", (sub, "subgraph_0", x), name="invoke_subgraph")
    item = g.create_node("call_function", "getitem", (call, 0), name="getitem")
    g.output((item,))
    return g


def test_a_higher_order_op_is_named_not_a_traceback():
    g = nested_graph()
    with pytest.raises(NotRunnable, match=r"node invoke_subgraph \(invoke_subgraph\) is a higher-order op"):
        check(g, lambda graph: None)
    with pytest.raises(NotRunnable, match="node invoke_subgraph"):
        to_graph_module(g)


def test_a_constant_tensor_is_faked_from_its_val():
    """`x * torch.tensor([...])` makes a get_attr `_tensor_constant0` whose value the plain graph does not keep: the
    fake run makes it from its val (the identity pass is clean, a stale val after it is found); a real run cannot."""
    def g(x):
        return (x * torch.tensor([1.0, 2.0, 3.0])).sum()

    joint = torch_fx.capture(g, _leaf(3)).joint
    assert joint.node("_tensor_constant0").op == "get_attr"
    assert check(joint, lambda graph: None) == []
    assert found(check(joint, lambda graph: setattr(graph.node("sum_1"), "target", "aten.clone.default"))) == [
        ("stale_val", "sum_1")]
    with pytest.raises(NotRunnable, match=r"node _tensor_constant0 \(get_attr _tensor_constant0\) reads a tensor"):
        compile_joint(joint)


def test_a_node_torch_cannot_run_is_named(graphs):
    """A pass that feeds mm a tensor of the wrong shape: torch's error, in one line, with the node."""
    def wrong(graph):
        mm = graph.node("mm")
        mm.args = (mm.args[1], mm.args[1])

    with pytest.raises(NotRunnable, match=r"running node mm \(aten.mm.default\)"):
        check(graphs["aot_function"][0], wrong)


# -- check_pass ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["aot_function", "module", "compile_run"])
def test_identity_pass_is_clean(graphs, name):
    g = graphs[name][0]
    assert check(g, lambda graph: None) == []
    assert check(g, lambda graph: graph.copy()) == []
    assert check(from_data(to_data(g)), lambda graph: None) == []  # as saved and loaded


def test_check_pass_runs_a_torch_graph_on_torch_by_default(graphs):
    """agdb.tracer.check_pass without a runner: a graph of aten ops gets a TorchRunner. tracer/fx's own check_pass
    and compile_joint (the engine's) say where such a graph runs instead of failing on its first op."""
    g = graphs["aot_function"][0]
    assert isinstance(default_runner(g), TorchRunner)
    assert isinstance(default_runner(capture_joint(lambda x: (x * 2).sum(), engine.randn(3, requires_grad=True))),
                      EngineRunner)
    assert found(check_pass(g, lambda graph: setattr(graph.node("sin"), "target", "aten.sum.default"))) == [
        ("stale_val", "sin")]
    with pytest.raises(NotRunnable, match=r"runner=TorchRunner\(graph\)"):
        fx_check_pass.check_pass(g, lambda graph: None)
    with pytest.raises(NotRunnable, match=r"ops are torch's \(aten.mul.Tensor\): agdb.tracer.compile_joint"):
        fx_compile.compile_joint(g)


def test_outputs_made_to_alias_each_other(graphs):
    """(a) A pass returning the forward's `mul` where the view `t` of it was: two outputs share storage now."""
    g = graphs["compile_run"][0]

    def cse(graph):
        out = graph.output_node
        values = list(out.args[0])
        values[1] = values[0]  # the first parameter's grad is now the loss too
        out.args = (values,)
        graph.changed()

    violations = check(g, cse)
    assert found(violations) == [("new_alias", "sum_1")]
    assert "outputs 0 (sum_1) and 1 (sum_1) now share storage" in violations[0].message


def test_inserted_mutation_is_caught(graphs):
    """(b) An in-place mul_ on a forward value, before the ops that read it."""
    def add_inplace(graph):
        mul = graph.node("mul")
        n = graph.create_node("call_function", "aten.mul_.Tensor", (mul, 3.0),
                              meta={"val": dict(mul.meta["val"]), "partitioner_tag": "is_forward"})
        move_after(graph, n, mul)
        graph.replace_all_uses_with(mul, n)
        n.args = (mul, 3.0)

    violations = check(graphs["aot_function"][0], add_inplace)
    assert found(violations) == [("mutation", "mul_")]
    assert "mul_ (aten.mul_.Tensor) mutates its input" in violations[0].message


def test_stale_val_is_caught(graphs):
    """(c) sin turned into a sum without updating meta['val']: the fake run computes a 0-d tensor."""
    def sum_instead(graph):
        graph.node("sin").target = "aten.sum.default"

    violations = check(graphs["aot_function"][0], sum_instead)
    assert found(violations) == [("stale_val", "sin")]
    assert "says shape [3, 5], stride [5, 1] but it computes shape [], stride []" in violations[0].message


def test_dropped_seq_nr_is_caught(graphs):
    """(d) A backward node's seq_nr dropped in place."""
    g = graphs["module"][0]
    node = next(n for n in g.nodes if n.meta.get("partitioner_tag") == "is_backward" and n.op == "call_function")

    def drop(graph):
        del graph.node(node.name).meta["seq_nr"]

    violations = check(g, drop)
    assert found(violations) == [("lost_meta", node.name)]
    assert f"it had {node.meta['seq_nr']}" in violations[0].message


def mul_by_two_as_add(copy_meta):
    """Every `aten.mul.Tensor(a, 2)` becomes `aten.add.Tensor(a, a)` (a new node taking the old one's users)."""
    def pass_(graph):
        for mul in [n for n in graph.nodes if n.target == "aten.mul.Tensor" and n.args[1] == 2]:
            meta = dict(mul.meta) if copy_meta else {"val": dict(mul.meta["val"])}
            add = graph.create_node("call_function", "aten.add.Tensor", (mul.args[0], mul.args[0]), meta=meta)
            move_after(graph, add, mul)
            graph.replace_all_uses_with(mul, add)
            graph.erase_node(mul)
    return pass_


def test_a_rewrite_keeping_meta_is_clean_and_one_dropping_it_is_named(graphs):
    g = graphs["aot_function"][0]
    assert check(g, mul_by_two_as_add(copy_meta=True)) == []
    violations = check(g, mul_by_two_as_add(copy_meta=False))
    assert found(violations) == [("lost_meta", "add_2")] * 2 + [("lost_meta", "add_3")] * 2  # forward, backward
    assert ["meta['seq_nr']" in v.message for v in violations] == [True, False] * 2
    assert "mul, which it replaced" in violations[0].message and "mul_2, which" in violations[2].message


# -- compile_joint ------------------------------------------------------------------------------------------------
def _grads(fn, args, seed=1):
    """fn's outputs and the grads of its tensor inputs that need one, for random output grads."""
    args = tuple(a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args)
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator().manual_seed(seed)
    go = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
    wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return [o.detach() for o in outs], torch.autograd.grad(outs, wanted, go)


@pytest.mark.parametrize("name", ["aot_function", "module", "compile_run"])
def test_compile_joint_gives_torchs_eager_gradients(graphs, name):
    g, fn, args = graphs[name]
    compiled = compile_joint(g)
    (out, grads), (ref_out, ref_grads) = _grads(compiled, args), _grads(fn, args)
    assert len(grads) == len(ref_grads) >= 2
    for a, b in zip(out + list(grads), ref_out + list(ref_grads), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", ["aot_function", "compile_run"])
def test_an_edited_joint_runs_and_keeps_the_gradients(graphs, name):
    """mul by 2 rewritten as x + x in forward and backward: the same gradients; mul by 3 instead: others."""
    g, fn, args = graphs[name]
    edited = g.copy()
    mul_by_two_as_add(copy_meta=True)(edited)
    assert not any(n.target == "aten.mul.Tensor" and n.args[1] == 2 for n in edited.nodes)
    _, ref = _grads(fn, args)
    _, grads = _grads(compile_joint(edited), args)
    for a, b in zip(grads, ref, strict=True):
        torch.testing.assert_close(a, b)
    wrong = g.copy()
    for n in wrong.nodes:
        if n.target == "aten.mul.Tensor" and n.args[1] == 2 and n.meta.get("partitioner_tag") == "is_backward":
            n.args = (n.args[0], 3)
    _, grads = _grads(compile_joint(wrong), args)
    assert not all(torch.allclose(a, b) for a, b in zip(grads, ref, strict=True))


def test_compile_joint_names_a_higher_order_op():
    g = nested_graph()
    g.nodes[0].meta["desc"] = PlainAOTInput(0)
    g.output_node.meta["desc"] = [PlainAOTOutput(0)]
    with pytest.raises(NotRunnable, match="node invoke_subgraph"):
        compile_joint(g)


def test_descriptors_from_torchs_text():
    """The `{"class", "expr"}` text of a run's graphs read back as agdb's descriptor classes."""
    def read(cls, expr, output=False):
        return descriptor_from_text({"class": cls, "expr": expr}, output)

    assert read("PlainAOTInput", "args[2]") == PlainAOTInput(2)
    assert read("ParamAOTInput", "self.get_parameter('lin.weight')") == ParamAOTInput("lin.weight")
    assert read("TangentAOTInput", "__output_tangent(output[1])") == TangentAOTInput(PlainAOTOutput(1))
    assert read("GradAOTOutput", "__grad(args[0])", True) == GradAOTOutput(PlainAOTInput(0))
    assert read("TokenAOTOutput", "__token(0)", True) == OtherAOTOutput("TokenAOTOutput", "__token(0)")
    assert descriptor_from_text(None, True) is None
