"""linear and matmul (aten's CompositeImplicitAutograd ops) in capture_joint: recorded as the ops they run, so the
tensors their autograd nodes save (the weight's transpose, the folded input) are graph nodes, never constants.

Independent truths: torch 2.13's aot_export_joint_with_descriptors / aot_function (the data flow, node for node),
the eager engine, and central finite differences in float64 numpy.
"""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine
from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.check_pass import check_pass
from agdb.tracer.fx.compile import compile_joint
from agdb.tracer.fx.descriptors import ParamAOTInput

from .corpus import COMPOSITES
from .test_torch_corpus import ENGINE_RENAMES, ours, torch_aot

IDS = [p.__name__ for p in COMPOSITES]


@pytest.mark.parametrize("program", COMPOSITES, ids=IDS)
def test_no_saved_tensor_becomes_a_constant(program):
    """Every tensor a backward formula reads is a placeholder or a node of the graph: no get_attr constant."""
    g, _ = ours(program)
    assert [n.name for n in g.nodes if n.op == "get_attr"] == []


@pytest.mark.parametrize("program", COMPOSITES, ids=IDS)
def test_no_op_pass_is_clean(program):
    """The graph re-runs to the vals it records (a constant copy loses the transpose's strides)."""
    g, _ = ours(program)
    assert check_pass(g, lambda graph: None) == []


def test_linear_weight_transpose_reads_the_parameter():
    """As in aot_export_joint_with_descriptors: `t = t(primals_1)` (the weight, a ParamAOTInput) in forward, and
    the backward's `t_1 = t(t)` reads that forward node."""
    g = capture_joint(engine.nn.Linear(4, 2), engine.randn(3, 4, requires_grad=True))
    t, t_1 = g.node("t"), g.node("t_1")
    assert t.args == (g.node("primals_1"),) and g.node("primals_1").meta["desc"] == ParamAOTInput("weight")
    assert t_1.args == (t,) and t_1.meta["partitioner_tag"] == "is_backward"


def flow(nodes, renames=None):
    """Each call node as (op name, where each tensor argument comes from): a placeholder by its descriptor's
    expr(), another node by its position in the list. torch's `detach` and at::sum_to's `view` after a `sum` pass
    their argument through (test_torch_corpus lists why)."""
    label: dict = {}
    out = []
    for n in nodes:
        if n.op == "placeholder":
            label[n] = n.meta["desc"].expr()
            continue
        if n.op != "call_function" or str(n.target) in ("getitem", "<built-in function getitem>"):
            continue
        t = str(n.target)
        name = t.split(".")[1] if t.startswith("aten.") else t.rsplit(".", 1)[-1]
        name = (renames or {}).get(name, name)
        sources = [label.get(a, "?") for a in n.args if hasattr(a, "op")]
        if name == "detach" or (renames is None and name == "view" and out and out[-1][0] == "sum"
                                and sources == [len(out) - 1]):
            label[n] = sources[0]
            continue
        label[n] = len(out)
        out.append((name, tuple(sources)))
    return out


@pytest.mark.parametrize("program", COMPOSITES, ids=IDS)
def test_data_flow_agrees_with_torch(program):
    """Node for node, the same ops reading the same nodes and placeholders as torch 2.13's joint graph."""
    pytest.importorskip("torch")
    g, _ = ours(program)
    assert flow(g.nodes, ENGINE_RENAMES) == flow(torch_aot(program).graph.nodes)


class SinLoss(engine.nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.lin = engine.nn.Linear(4, 3, bias=bias)

    def forward(self, x):
        return self.lin(x).sin().sum()


def numpy_loss(w, b, x):
    return np.sin(x @ w.T + (b if b is not None else 0)).sum()


def finite_differences(f, arrays, eps=1e-6):
    """Central differences of f(*arrays) with respect to each array, in float64."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi = [x.copy() for x in arrays]
            lo = [x.copy() for x in arrays]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(2, 4), (2, 3, 4), (4,)])
def test_compile_joint_with_a_new_weight(bias, x_shape):
    """The compiled joint graph, called with another weight, bias and input, gives the gradients of that weight:
    equal to the eager engine's and to finite differences (the captured weight's would differ)."""
    engine.manual_seed(0)
    compiled = compile_joint(capture_joint(SinLoss(bias), engine.randn(*x_shape, requires_grad=True)))
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4))
    b = rng.standard_normal(3) if bias else None
    x = rng.standard_normal(x_shape)
    tensors = [engine.tensor(a.astype(np.float32), requires_grad=True) for a in (w, b, x) if a is not None]
    compiled(*tensors).backward()
    got = [t.grad.numpy() for t in tensors]

    eager = SinLoss(bias)
    with engine.no_grad():
        eager.lin.weight.copy_(tensors[0])
        if bias:
            eager.lin.bias.copy_(tensors[1])
    xe = tensors[-1].detach().requires_grad_()
    eager(xe).backward()
    want = [eager.lin.weight.grad.numpy()] + ([eager.lin.bias.grad.numpy()] if bias else []) + [xe.grad.numpy()]
    for a, e in zip(got, want, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)

    arrays = [a.astype(np.float32).astype(np.float64) for a in (w, b, x) if a is not None]
    fd = finite_differences((lambda w_, b_, x_: numpy_loss(w_, b_, x_)) if bias
                            else (lambda w_, x_: numpy_loss(w_, None, x_)), arrays)
    for a, e in zip(got, fd, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
