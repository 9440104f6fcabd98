"""FX graphs from real torch 2.13 (tracer/sources/torch/fx.py) in agdb's model: torch's own seq_nr, tags and descriptors
survive the conversion, the forward-to-backward map and its anomalies read them, and they agree with capture_joint.

Facts below are derived by hand from how AOTAutograd numbers nodes (a forward node takes the number of the autograd
node its op made, a backward node the number of the node being run; docs/fx.md) and were checked on torch 2.13.
Absolute numbers depend on what the process ran before, so every check is relative to the first forward node.
"""
from __future__ import annotations

import json

import pytest

from agdb import engine
from agdb.tracer.fx import capture_joint, from_data, to_data
from agdb.tracer.fx.fx_utils import get_named_param_nodes, get_param_and_grad_nodes
from agdb.tracer.fx.seq_map import anomalies, seq_map

from .corpus import PROGRAMS

torch = pytest.importorskip("torch")

from agdb.tracer.sources.torch import fx as torch_fx  # noqa: E402


def _r(*shape):
    return torch.randn(*shape, requires_grad=True)


def _calls(g):
    return [n for n in g.nodes if n.op == "call_function"]


def _rel(g):
    """name -> seq_nr relative to the first forward node's."""
    calls = _calls(g)
    s0 = calls[0].meta["seq_nr"]
    return {n.name: n.meta["seq_nr"] - s0 for n in calls}


def _map(g):
    return {f.name: [b.name for b in bs] for f, bs in seq_map(g).backward_of.items()}


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = self.lin1(x).relu()  # MLP-LINE
        return self.lin2(h).sum()


def test_mlp_module_joint_graph_keeps_torchs_numbers_tags_and_descriptors():
    """An MLP through aot_export_joint_with_descriptors: each forward op took the next number (detach repeats
    relu's), each backward node carries its forward node's, and the descriptors name parameters and grads."""
    g = torch_fx.capture(MLP(), torch.randn(5, 4)).joint
    rel = _rel(g)
    assert {k: rel[k] for k in ("t", "addmm", "relu", "detach", "t_1", "addmm_1", "sum_1")} == \
        {"t": 0, "addmm": 1, "relu": 2, "detach": 2, "t_1": 3, "addmm_1": 4, "sum_1": 5}
    # backward: sum's expand, then lin2's addmm (mm, mm, sum+view for the bias), its t, relu's threshold_backward...
    assert _map(g) == {"t": ["t_8"], "addmm": ["t_6", "mm_2", "t_7", "sum_3", "view_1"],
                       "relu": ["detach_1", "threshold_backward"], "t_1": ["t_5"],
                       "addmm_1": ["t_2", "mm", "t_3", "mm_1", "t_4", "sum_2", "view"], "sum_1": ["expand"]}
    back = seq_map(g).forward_of
    assert back[g.node("threshold_backward")] is g.node("relu") and back[g.node("t_8")] is g.node("t")
    tags = {n.meta["partitioner_tag"] for n in _calls(g) if n.name in ("t", "relu", "sum_1")}
    assert tags == {"is_forward"} and g.node("expand").meta["partitioner_tag"] == "is_backward"
    assert not any(n.meta.get("is_gradient_acc") for n in g.nodes)
    assert list(get_named_param_nodes(g)) == ["lin1.weight", "lin1.bias", "lin2.weight", "lin2.bias"]
    grads = {p.expr(): grad.name for p, (_, grad) in get_param_and_grad_nodes(g).items()}
    assert grads == {"self.get_parameter('lin1.weight')": "t_8", "self.get_parameter('lin1.bias')": "view_1",
                     "self.get_parameter('lin2.weight')": "t_5", "self.get_parameter('lin2.bias')": "view"}
    assert [d.expr() if d else None for d in g.output_node.meta["desc"]][:2] == \
        ["output[0]", "__grad(self.get_parameter('lin1.weight'))"]
    assert g.node("tangents_1").meta["desc"].expr() == "__output_tangent(output[0])"
    # only relu and the detach AOT adds for its saved output share a number
    assert [(a.kind, a.nodes) for a in anomalies(g)] == [("shared_seq_nr", ("relu", "detach"))]


def test_mlp_nodes_carry_the_users_line_the_module_stack_and_val():
    """relu comes from the user's forward line, inside no submodule; lin1's addmm from torch's Linear.forward,
    inside lin1; val summaries are plain shape/stride/dtype, and a view shares its base's storage."""
    g = torch_fx.capture(MLP(), torch.randn(5, 4)).joint
    relu = g.node("relu")
    assert relu.stack_trace.endswith("h = self.lin1(x).relu()  # MLP-LINE") and "in forward" in relu.stack_trace
    assert "nn_module_stack" not in relu.meta
    assert g.node("addmm").meta["nn_module_stack"] == {"lin1": ["lin1", "torch.nn.modules.linear.Linear"]}
    assert "linear.py" in g.node("addmm").stack_trace
    assert g.node("addmm").meta["val"] == {"shape": [5, 8], "stride": [8, 1], "dtype": "float32",
                                           "storage": g.node("addmm").meta["val"]["storage"]}
    assert g.node("t").meta["val"]["stride"] == [1, 4]
    assert g.node("t").meta["val"]["storage"] == g.node("primals_1").meta["val"]["storage"]  # t is a view
    # torch copies each forward node's line and module stack to its backward nodes
    assert g.node("threshold_backward").stack_trace == relu.stack_trace
    assert g.node("t_8").meta["fwd_nn_module_stack"] == {"lin1": ["lin1", "torch.nn.modules.linear.Linear"]}


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3


def test_custom_function_ops_take_the_function_nodes_number():
    """aot_function traces a custom Function through: its forward's `x * 3` and its backward's `g * 3` both carry the
    Function node's number, one past exp's; exp's backward multiplies by the saved exp."""
    r = torch_fx.capture(lambda x: Scale.apply(x.exp()).sum(), _r(3))
    g = r.joint
    assert r.api == "aot_function"
    rel = _rel(g)
    assert (rel["exp"], rel["mul"], rel["sum_1"]) == (0, 1, 2)
    assert _map(g) == {"exp": ["detach_1", "mul_2"], "mul": ["mul_1"], "sum_1": ["expand"]}
    assert g.node("mul_1").args[1] == 3 and g.node("mul").stack_trace.endswith("return x * 3")
    assert all(n.meta.get("autograd_backward") for n in _calls(g) if n.meta["partitioner_tag"] == "is_backward")


def test_gradient_accumulation_of_a_tensor_used_twice():
    """`a` feeds sin and add: its two grads are summed by one is_gradient_acc add whose number is the last forward
    number (sum's), whose stack ends with torch's special line, and which maps to no forward node."""
    def f(x, w):
        a = x * w
        return (a.sin() + a).sum()

    r = torch_fx.capture(f, _r(4), _r(4))
    g = r.joint
    acc = [n for n in g.nodes if n.meta.get("is_gradient_acc")]
    assert [n.name for n in acc] == ["add_1"] and acc[0].target == "aten.add.Tensor"
    assert acc[0].meta["seq_nr"] == g.node("sum_1").meta["seq_nr"]
    assert acc[0].stack_trace.endswith("Gradient addition node due to multiple use of tensor around:")
    assert g.node("add_1") not in seq_map(g).forward_of
    assert _map(g) == {"mul": ["mul_2", "mul_3"], "sin": ["cos", "mul_1"], "add": [], "sum_1": ["expand"]}
    [a] = anomalies(g)
    assert a.kind == "gradient_acc" and "a gradient sum for a tensor used more than once" in a.message
    # the partition: the forward graph saves the inputs and `mul` for the backward graph
    saved = [d.expr() for d in r.forward.output_node.meta["desc"]]
    assert saved == ["output[0]", "__saved_for_backwards_0", "__saved_for_backwards_1", "__saved_for_backwards_2"]
    assert [n.name for n in r.backward.nodes if n.op == "placeholder"] == ["primals_1", "primals_2", "mul",
                                                                             "tangents_1"]
    assert [n.meta["seq_nr"] for n in _calls(r.backward)] == [n.meta["seq_nr"] for n in _calls(g)[4:]]


def test_in_place_op_gets_its_own_number_and_an_identity_backward():
    """`y.add_(1)` is functionalized to `add`, which took AddBackward0's number; that node's backward is the
    identity, so add maps to no backward node while mul and sin keep theirs."""
    def f(x):
        y = x * 2
        y.add_(1)
        return y.sin().sum()

    g = torch_fx.capture(f, _r(3)).joint
    assert [n.target for n in _calls(g)][:2] == ["aten.mul.Tensor", "aten.add.Tensor"]
    assert _rel(g)["add"] == 1 and g.node("add").stack_trace.endswith("y.add_(1)")
    assert _map(g) == {"mul": ["mul_2"], "add": [], "sin": ["cos", "mul_1"], "sum_1": ["expand"]}
    assert anomalies(g) == []


def test_in_place_on_a_view_makes_backward_nodes_with_no_forward_number():
    """`y[0].mul_(3)` makes MulBackward0 and then CopySlices, one number later: the forward `mul_1` and the
    `select_scatter` functionalization adds share MulBackward0's number, while every op of CopySlices' backward
    carries CopySlices' number, which no forward node has."""
    def f(x):
        y = x * 2
        y[0].mul_(3)
        return y.sum()

    g = torch_fx.capture(f, _r(3)).joint
    rel = _rel(g)
    assert (rel["mul"], rel["select"], rel["mul_1"], rel["select_scatter"]) == (0, 1, 2, 2)
    orphans = [n.name for n in _calls(g) if n.meta["partitioner_tag"] == "is_backward" and rel[n.name] == 3]
    assert orphans == ["new_empty_strided", "copy", "select_4", "clone", "mul_2", "copy_1", "select_scatter_1"]
    found = anomalies(g)
    assert [a.nodes[0] for a in found if a.kind == "no_forward"] == orphans
    assert [(a.kind, a.nodes) for a in found if a.kind != "no_forward"] == \
        [("shared_seq_nr", ("mul_1", "select_scatter"))]
    assert _map(g)["mul"] == ["mul_3"]


def test_converted_graph_is_plain_data_and_survives_json():
    """A torch graph goes through to_data, JSON and from_data unchanged: same code, same map, same anomalies."""
    g = torch_fx.capture(MLP(), torch.randn(5, 4)).joint
    back = from_data(json.loads(json.dumps(to_data(g))))
    assert back.print_readable(meta_keys=("seq_nr", "partitioner_tag")) == \
        g.print_readable(meta_keys=("seq_nr", "partitioner_tag"))
    assert _map(back) == _map(g) and [a.to_json() for a in anomalies(back)] == [a.to_json() for a in anomalies(g)]
    assert [n.meta.get("desc") for n in back.nodes] == [n.meta.get("desc") for n in g.nodes]


def _summary(g):
    """(forward seq_nrs, forward seq_nrs with backward nodes, grad-acc seq_nrs), relative, without AOT's detach."""
    calls = [n for n in _calls(g) if n.target not in ("aten.detach.default", "getitem", "engine.detach")]
    fwd = [n.meta["seq_nr"] for n in calls if n.meta["partitioner_tag"] != "is_backward"]
    s0 = fwd[0]
    bwd = {n.meta["seq_nr"] - s0 for n in calls if n.meta["partitioner_tag"] == "is_backward"
           and not n.meta.get("is_gradient_acc")}
    acc = sorted(n.meta["seq_nr"] - s0 for n in calls if n.meta.get("is_gradient_acc"))
    rel = [s - s0 for s in fwd]
    return rel, sorted(bwd & set(rel)), acc


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_converted_torch_graph_agrees_with_capture_joint(program):
    """On the corpus test_torch_corpus.py compares, the converted graph and capture_joint's agree on the seq_nr
    relations and the descriptors (functions' descriptors come from aot_function's joint graph)."""
    target, args = program(torch)
    theirs = torch_fx.capture(target, *args).joint
    target, args = program(engine)
    ours = capture_joint(target, *args)
    assert _summary(theirs) == _summary(ours)
    descs = [(n.op, repr(n.meta.get("desc"))) for n in theirs.nodes if n.op == "placeholder"]
    assert descs == [(n.op, repr(n.meta.get("desc"))) for n in ours.nodes if n.op == "placeholder"]
    assert theirs.output_node.meta["desc"] == ours.output_node.meta["desc"]


def test_compiled_target_gives_torch_compiles_graphs_and_says_dynamos_carry_no_seq_nr():
    """A torch.compile result: the graphs come from torch.compile's AOTAutograd (same relations as aot_function's),
    and the capture notes that Dynamo's own graph carries no seq_nr."""
    def f(x, w):
        a = x * w
        return (a.sin() + a).sum()

    r = torch_fx.capture(torch.compile(f), _r(4), _r(4))
    assert r.api == "torch.compile" and "carries no seq_nr" in r.notes[0]
    plain = torch_fx.capture(f, _r(4), _r(4))
    assert _rel(r.joint) == _rel(plain.joint) and _map(r.joint) == _map(plain.joint)
    assert r.forward is not None and r.backward is not None


def test_a_graph_without_seq_nr_is_refused_with_the_reason():
    """Dynamo's graph (what a torch.compile backend receives) has no seq_nr: check_seq_nr says so, naming the fix,
    instead of letting a report show empty columns."""
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(lambda x: (x * 2).sin().sum(), backend=backend)(_r(3))
    torch._dynamo.reset()
    g = torch_fx.to_graph(seen[0])
    assert not any("seq_nr" in n.meta for n in g.nodes)
    with pytest.raises(torch_fx.NoSeqNr, match="carry no seq_nr .* mark the function or module itself"):
        torch_fx.check_seq_nr(g, "torch.compile's Dynamo")


def test_nothing_needing_a_gradient_is_a_clear_error():
    """No input requires grad: no backward graph, and the error says what to give."""
    with pytest.raises(torch_fx.TorchFxError, match="requires_grad=True"):
        torch_fx.capture(lambda x: x.sin().sum(), torch.randn(3))
    with pytest.raises(torch_fx.TorchFxError, match="function or a torch.nn.Module"):
        torch_fx.capture(3, torch.randn(3))


def test_record_run_is_a_bridge_trace_of_the_eager_run():
    """record_run records one eager forward and backward with the bridge, leaving `.grad` untouched."""
    x = _r(3)
    trace = torch_fx.record_run(lambda x: (x * 2).sin().sum(), x)
    assert len(trace) > 0 and x.grad is None
    from agdb.tracer.store.schema import Kind

    names = {trace.node(trace.event_node(int(step))).name for step in trace.steps_of(Kind.NODE_STARTED)}
    assert {"MulBackward0", "SinBackward0", "SumBackward0"} <= names


def shifted_program(T):
    """A custom Function applied under no_grad: its node takes a number and joins no graph, so the next ops that make
    no node of their own (`a.detach() * 2`) repeat that number."""
    class Scale(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    def f(x):
        a = x.exp()
        with T.no_grad():
            Scale.apply(a)  # SHIFT-LINE
        b = a.detach() * 2
        return (a.sin() * b).sum()

    return f, (T.randn(3, requires_grad=True),)


def test_a_custom_function_under_no_grad_shifts_numbers_and_the_report_names_its_line():
    """Torch's detach_1 and mul_1 took the number of ScaleBackward, made at the `Scale.apply` line: the report says
    `shifted` with that line and node, as capture_joint's does on the engine."""
    target, args = shifted_program(torch)
    g = torch_fx.capture(target, *args).joint
    rel = _rel(g)
    assert (rel["exp"], rel["detach_1"], rel["mul_1"], rel["sin"]) == (0, 1, 1, 2)
    [shifted] = [a for a in anomalies(g) if a.kind == "shifted"]
    assert shifted.nodes == ("detach_1", "mul_1")
    [(file, line, function, node)] = shifted.culprits
    assert (file, function, node) == (__file__, "f", "ScaleBackward")
    import linecache

    assert linecache.getline(file, line).strip().endswith("# SHIFT-LINE")
    target, args = shifted_program(engine)
    [mine] = [a for a in anomalies(capture_joint(target, *args)) if a.kind == "shifted"]
    assert mine.culprits == shifted.culprits
    assert torch.autograd.Function.__dict__["apply"].__func__.__module__ == "torch.autograd.function"  # restored


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_converted_op_names_agree_with_capture_joint(program):
    """The op names of the converted graph and capture_joint's agree up to test_torch_corpus.py's listed
    differences (AOT's detach, the engine's formula helpers, aten's sum_to pair)."""
    from .test_torch_corpus import ENGINE_RENAMES, op_names

    target, args = program(torch)
    theirs = [n for n in _calls(torch_fx.capture(target, *args).joint)
              if n.target not in ("aten.detach.default", "getitem")]
    target, args = program(engine)
    ours = [n for n in _calls(capture_joint(target, *args)) if n.target != "getitem"]
    assert op_names(theirs) == op_names(ours, ENGINE_RENAMES)


def test_compiled_module_keeps_a_module_stack_without_addresses():
    """Under Dynamo, torch keys the module stack by an object id and names `L['self'].lin`: the converted stack is
    `{"lin": ["lin", class]}`, the same on every run."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x).tanh().sum()

    g = torch_fx.capture(torch.compile(M()), torch.randn(4, 3)).joint
    assert g.node("addmm").meta["nn_module_stack"] == {"lin": ["lin", "torch.nn.modules.linear.Linear"]}
    assert "nn_module_stack" not in g.node("tanh").meta


def test_graph_break_keeps_the_first_graph_and_its_own_partitions():
    """A graph break makes two graphs, whose backward graphs torch compiles in reverse order: the capture shows the
    first joint graph, with the forward and backward graphs that hold its ops, and says there were two."""
    def f(x):
        a = x.sin()
        torch._dynamo.graph_break()
        return (a * x).sum()

    r = torch_fx.capture(torch.compile(f), _r(3))
    assert any("2 graphs (graph breaks)" in note for note in r.notes)
    assert [n.target for n in _calls(r.joint)] == ["aten.sin.default", "aten.cos.default", "aten.mul.Tensor"]
    assert [n.target for n in _calls(r.forward)] == ["aten.sin.default"]
    assert [n.target for n in _calls(r.backward)] == ["aten.cos.default", "aten.mul.Tensor"]


def test_in_place_op_on_an_input_is_an_input_mutation_output():
    """`c.add_(1)` on an input needing no grad: the joint graph returns the new value first, described as
    `__input_mutation(args[1])`, and the descriptor survives plain data."""
    def f(x, c):
        c.add_(1)
        return (x * c).sum()

    g = torch_fx.capture(f, _r(3), torch.randn(3)).joint
    descs = g.output_node.meta["desc"]
    assert [d.expr() if d else None for d in descs] == ["__input_mutation(args[1])", "output[0]", "__grad(args[0])",
                                                        None]
    assert g.output_node.args[0][0] is g.node("add")
    assert from_data(json.loads(json.dumps(to_data(g)))).output_node.meta["desc"] == descs


def test_descriptor_kinds_agdb_has_no_class_for_keep_torchs_name_and_expr():
    """A torch descriptor agdb has no class for becomes OtherAOTInput/OtherAOTOutput with torch's class name and
    expr() text; known ones nest (a tangent of a plain output) and compare equal to agdb's own."""
    from torch._functorch._aot_autograd import descriptors as td

    from agdb.tracer.fx import descriptors as ad

    assert torch_fx.to_descriptor(td.DummyAOTInput(3)) == ad.OtherAOTInput("DummyAOTInput", "__dummy3")
    assert torch_fx.to_descriptor(td.DummyAOTOutput(1)) == ad.OtherAOTOutput("DummyAOTOutput", "__dummy1")
    tangent = torch_fx.to_descriptor(td.TangentAOTInput(td.PlainAOTOutput(2)))
    assert tangent == ad.TangentAOTInput(ad.PlainAOTOutput(2)) and tangent.expr() == "__output_tangent(output[2])"
    other = ad.descriptor_from_data(ad.OtherAOTInput("DummyAOTInput", "__dummy3").to_data())
    assert other.expr() == "__dummy3"
