"""Descriptors (2.13's classes and expr()), the fx_utils helpers, and compile_joint on captured graphs."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine as torch
from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.compile import compile_joint
from agdb.tracer.fx.descriptors import (
    BufferAOTInput,
    GradAOTOutput,
    ParamAOTInput,
    PlainAOTInput,
    PlainAOTOutput,
    TangentAOTInput,
)
from agdb.tracer.fx.fx_utils import (
    get_all_input_and_grad_nodes,
    get_all_output_and_tangent_nodes,
    get_named_buffer_nodes,
    get_named_param_nodes,
    get_param_and_grad_nodes,
    get_plain_input_and_grad_nodes,
    get_plain_output_and_tangent_nodes,
)
from agdb.tracer.fx.interpret import NotRunnable

from .test_capture import f_custom, f_diamond, leaf


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))

    def forward(self, x):
        return (self.lin(x).relu() * self.scale).sum()


def test_expr_as_torch_2_13_writes_it():
    """expr() and repr of each descriptor class, as measured on torch 2.13."""
    assert PlainAOTInput(0).expr() == "args[0]"
    assert ParamAOTInput("lin.weight").expr() == "self.get_parameter('lin.weight')"
    assert BufferAOTInput("scale").expr() == "self.get_buffer('scale')"
    assert TangentAOTInput(PlainAOTOutput(0)).expr() == "__output_tangent(output[0])"
    assert GradAOTOutput(PlainAOTInput(1)).expr() == "__grad(args[1])"
    assert repr(TangentAOTInput(PlainAOTOutput(0))) == "TangentAOTInput(output=PlainAOTOutput(idx=0))"
    assert ParamAOTInput("w").is_param() and BufferAOTInput("b").is_buffer()
    assert TangentAOTInput(PlainAOTOutput(0)).is_tangent() and GradAOTOutput(PlainAOTInput(0)).is_grad()


def test_helpers_on_a_module():
    """The helpers pair inputs with grads and outputs with tangents, by descriptor, as torch's fx_utils do."""
    g = capture_joint(Net(), torch.randn(4, 3))
    pairs = {d.expr(): (n.name, gr.name if gr is not None else None)
             for d, (n, gr) in get_all_input_and_grad_nodes(g).items()}
    w_grad = pairs["self.get_parameter('lin.weight')"][1]
    assert pairs["self.get_buffer('scale')"] == ("primals_3", None) and pairs["args[0]"] == ("primals_4", None)
    assert pairs["__output_tangent(output[0])"] == ("tangents_1", None) and w_grad is not None
    outs = {d.expr(): (n.name if n else None, t.name if t else None)
            for d, (n, t) in get_all_output_and_tangent_nodes(g).items()}
    assert outs["output[0]"] == ("sum", "tangents_1") and outs["__grad(self.get_parameter('lin.weight'))"][0] == w_grad
    assert list(get_named_param_nodes(g)) == ["lin.weight", "lin.bias"]
    assert list(get_named_buffer_nodes(g)) == ["scale"]
    assert set(get_param_and_grad_nodes(g)) == {ParamAOTInput("lin.weight"), ParamAOTInput("lin.bias")}
    assert set(get_plain_input_and_grad_nodes(g)) == {PlainAOTInput(0)}
    assert set(get_plain_output_and_tangent_nodes(g)) == {PlainAOTOutput(0)}


def test_compile_joint_matches_the_engine():
    """The compiled joint graph gives the same output and gradients as the function it was captured from."""
    x, w = leaf(4), leaf(4)
    compiled = compile_joint(capture_joint(f_diamond, x, w))
    x2, w2 = leaf(4), leaf(4)
    compiled(x2, w2).backward()
    a, b = x2.detach().requires_grad_(), w2.detach().requires_grad_()
    f_diamond(a, b).backward()
    np.testing.assert_allclose(x2.grad.numpy(), a.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w2.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_compile_joint_runs_an_edited_module_graph():
    """Export, transform (scale the weight's gradient by 2), run again: params, buffers, then inputs."""
    net = Net()
    g = capture_joint(net, torch.randn(4, 3))
    _, grad_node = get_param_and_grad_nodes(g)[ParamAOTInput("lin.weight")]
    doubled = g.create_node("call_function", "engine.mul", (grad_node, 2.0),
                            meta={"partitioner_tag": "is_backward"})
    g.nodes.remove(doubled)
    g.nodes.insert(g.nodes.index(g.output_node), doubled)
    out = g.output_node
    out.args = ((*[doubled if v is grad_node else v for v in out.args[0]],),)
    g.changed()
    w = net.lin.weight.detach().requires_grad_()
    b = net.lin.bias.detach().requires_grad_()
    x = torch.randn(4, 3)
    compile_joint(g)(w, b, net.scale, x).backward()
    w_ref = net.lin.weight
    net(x).backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w_ref.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), net.lin.bias.grad.numpy(), rtol=1e-5)


def test_python_op_graph_refuses_to_compile_clearly():
    """A PythonOp graph cannot run again: the error says to capture with custom_functions='trace'."""
    compiled = compile_joint(capture_joint(f_custom, leaf(3), custom_functions="python_op"))
    with pytest.raises(NotRunnable, match="custom_functions='trace'"):
        compiled(leaf(3))


def test_compile_joint_runs_each_call_form_as_captured():
    """Ops with several public forms (Tensor.sum(dim) and engine.sum, x.to(dtype), 2 - x) run again as the
    captured call ran them."""
    def f(x):
        a = x.sum(0) + torch.sum(x, 1, keepdim=True).sum(0)
        b = (2 - a).to(torch.float64)
        return (b * b).sum()

    x = leaf(3, 3)
    compiled = compile_joint(capture_joint(f, x))
    x2 = leaf(3, 3)
    out = compiled(x2)
    out.backward()
    ref = x2.detach().requires_grad_()
    expected = f(ref)
    expected.backward()
    np.testing.assert_allclose(out.item(), expected.item(), rtol=1e-6)
    np.testing.assert_allclose(x2.grad.numpy(), ref.grad.numpy(), rtol=1e-5)


def test_entry_points_on_tracer():
    """tracer.capture_joint is the fx package's; tracer.compile_joint and tracer.check_pass are tracer/sources/fx.py's,
    which run an engine graph as the fx package's functions do (and a torch graph on torch)."""
    from agdb import tracer
    from agdb.tracer.sources import fx as any_source

    assert tracer.capture_joint is capture_joint
    assert tracer.compile_joint is any_source.compile_joint and tracer.check_pass is any_source.check_pass
    x, w = leaf(4), leaf(4)
    graph = capture_joint(f_diamond, x, w)
    assert tracer.compile_joint(graph)(x, w).item() == pytest.approx(compile_joint(graph)(x, w).item())
    assert tracer.check_pass(graph, lambda g: None) == []
