"""capture_joint's meta rules, pinned by hand-derived expectations (numbers relative to the first forward node)."""
from __future__ import annotations

import threading

from agdb import engine as torch
from agdb.tracer.fx import GRADIENT_ACC_SPECIAL_STACK, capture_joint, from_data, to_data


def rows(g, tag=None):
    """(name, seq_nr relative to the first forward node, is_gradient_acc) of the call_function nodes."""
    calls = [n for n in g.nodes if n.op == "call_function"]
    s0 = calls[0].meta["seq_nr"]
    return [(n.name, n.meta["seq_nr"] - s0, bool(n.meta.get("is_gradient_acc"))) for n in calls
            if tag is None or n.meta["partitioner_tag"] == tag]


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


def f_diamond(x, w):
    a = x * w
    b = a.sin()
    c = b + a
    return c.sum()


def test_forward_backward_and_gradient_accumulation():
    """Forward nodes take their autograd node's number; backward nodes the running node's; the sum of a's two
    grads is a grad-acc node numbered like the last forward node, with operands (buffer, new grad)."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    assert rows(g, "is_forward") == [("mul", 0, False), ("sin", 1, False), ("add", 2, False), ("sum", 3, False)]
    # SumBackward0 (3) expands; AddBackward0 is the identity (no node); SinBackward0 (1) runs cos and mul; then
    # a's buffer sums the two grads (the add's, which came first, and sin's); MulBackward0 (0) last.
    assert rows(g, "is_backward") == [("expand", 3, False), ("cos", 1, False), ("mul_1", 1, False),
                                      ("add_1", 3, True), ("mul_2", 0, False), ("mul_3", 0, False)]
    acc = g.node("add_1")
    assert acc.args == (g.node("expand"), g.node("mul_1"))
    assert GRADIENT_ACC_SPECIAL_STACK in acc.meta["stack_trace"] and acc.meta["autograd_backward"]
    assert "b = a.sin()" in acc.meta["stack_trace"]  # the forward line of the node that ran just before
    assert g.node("cos").meta["autograd_backward"] and "autograd_backward" not in g.node("mul").meta
    assert g.node("mul").meta["stack_trace"].endswith("a = x * w")


def test_placeholders_outputs_and_val():
    """Primals then tangents, tagged; the output returns the result then each input's gradient; val has
    shape, stride, dtype and a storage id shared by views."""
    g = capture_joint(lambda x: (x.t() * 2).sum(), leaf(2, 3))
    ph = [n for n in g.nodes if n.op == "placeholder"]
    assert [(n.name, n.meta["partitioner_tag"]) for n in ph] == [("primals_1", "is_forward"),
                                                                  ("tangents_1", "is_backward")]
    assert ph[0].meta["val"] == {"shape": [2, 3], "stride": [3, 1], "dtype": "float32", "storage": 0}
    t = g.node("t")
    assert t.meta["val"]["stride"] == [1, 3] and t.meta["val"]["storage"] == 0
    out = g.output_node
    assert len(out.args[0]) == 2 and out.args[0][0] is g.node("sum")


def test_op_without_autograd_node_takes_the_latest_number():
    """detach and ops on tensors that need no grad make no autograd node: they repeat the last number."""
    def f(x):
        y = x.exp()
        c = torch.ones(3) * 2  # no input requires grad: no node
        d = y.detach()
        return (y * c).sum() + d.sum()

    g = capture_joint(f, leaf(3))
    fwd = rows(g, "is_forward")
    assert [r[:2] for r in fwd] == [("exp", 0), ("ones", 0), ("mul", 0), ("detach", 0), ("mul_1", 1),
                                     ("sum", 2), ("sum_1", 2), ("add", 3)]


def test_leaf_used_twice_sums_in_its_buffer():
    """x * x: MulBackward0's two grads for x meet in its AccumulateGrad buffer: one grad-acc add, numbered
    like the last forward node (not MulBackward0's 0)."""
    g = capture_joint(lambda x: (x * x).sum(), leaf(3))
    assert rows(g, "is_backward") == [("expand", 1, False), ("mul_1", 0, False), ("mul_2", 0, False),
                                      ("add", 1, True)]


def test_tensor_hook_ops_are_marked_as_gradient_accumulation():
    """Ops a tensor hook runs fall in the window between two nodes: PyTorch marks them is_gradient_acc and
    numbers them by the forward rule (the known mislabelling)."""
    def f(x):
        a = x * 3
        a.register_hook(lambda g: g * 7)
        return a.sin().sum()

    g = capture_joint(f, leaf(3))
    bw = rows(g, "is_backward")
    assert bw == [("expand", 2, False), ("cos", 1, False), ("mul_1", 1, False), ("mul_2", 2, True),
                  ("mul_3", 0, False)]
    assert g.node("mul_2").args[1] == 7


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, shape):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None, None


def f_custom(x):
    y = x.sin()
    z = Double.apply(y, 2.0, (1, 2))
    return z.sum()


def test_custom_function_traced_through():
    """Inner ops of a custom Function take its node's number, forward and backward."""
    g = capture_joint(f_custom, leaf(3))
    assert rows(g) == [("sin", 0, False), ("mul", 1, False), ("sum", 2, False), ("expand", 2, False),
                       ("mul_1", 1, False), ("cos", 0, False), ("mul_2", 0, False)]


def test_custom_function_as_python_op():
    """With custom_functions='python_op' the Function is one PythonOp and one PythonOpGrad, its non-tensor
    arguments classified (float scalar, int tuple)."""
    g = capture_joint(f_custom, leaf(3), custom_functions="python_op")
    assert rows(g) == [("sin", 0, False), ("PythonOp", 1, False), ("sum", 2, False), ("expand", 2, False),
                       ("PythonOpGrad", 1, False), ("cos", 0, False), ("mul", 0, False)]
    op = g.node("PythonOp")
    assert op.kwargs == {"name": "Double", "input_float_scalars": [2.0], "input_float_scalars_positions": [1],
                         "input_int_tuples": [[1, 2]], "input_int_tuples_positions": [2]}
    assert g.node("PythonOpGrad").kwargs == {"name": "Double"}


class Reentrant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x2 = x.detach().requires_grad_()
            y = x2.exp().sum()
            (gx,) = torch.autograd.grad(y, x2)
        return grad * gx


def test_reentrant_backward_keeps_the_outer_number():
    """A backward run inside a custom backward: the inner nodes have no hooks, so every op traced inside takes
    the outer Function node's number from the stack, which is popped once after."""
    g = capture_joint(lambda x: Reentrant.apply(x * 2).sum(), leaf(3))
    bw = rows(g, "is_backward")
    names = [r[0] for r in bw]
    assert names == ["expand", "detach", "exp", "sum_1", "expand_1", "mul_1", "mul_2", "mul_3"]
    inner = bw[1:-1]  # detach, exp, sum, the inner grad's expand and exp's formula mul, then grad * gx
    assert {r[1] for r in inner} == {1} and not any(r[2] for r in inner)
    assert bw[-1][1] == 0  # x * 2's MulBackward0, after the Function node's post-hook popped its number


def test_fresh_thread_gives_minus_one():
    """On a new thread the counter starts at 0: an op with no autograd node first gets 0 - 1 = -1."""
    out = {}

    def run():
        out["g"] = capture_joint(lambda x: (torch.ones(2) + x).sum(), leaf(2))

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert [n.meta["seq_nr"] for n in out["g"].nodes if n.op == "call_function"][:2] == [-1, 0]


def test_module_nn_module_stack_and_descriptors():
    """A module's parameters and buffers come first; ops inside a submodule carry nn_module_stack."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            return (self.lin(x).relu() * self.scale).sum()

    g = capture_joint(M(), torch.randn(4, 3))
    ph = [(n.name, n.meta["desc"].expr()) for n in g.nodes if n.op == "placeholder"]
    assert ph == [("primals_1", "self.get_parameter('lin.weight')"), ("primals_2", "self.get_parameter('lin.bias')"),
                  ("primals_3", "self.get_buffer('scale')"), ("primals_4", "args[0]"),
                  ("tangents_1", "__output_tangent(output[0])")]
    assert list(g.node("addmm").meta["nn_module_stack"]) == ["lin"] == list(g.node("t").meta["nn_module_stack"])
    assert "nn_module_stack" not in g.node("relu").meta
    descs = g.output_node.meta["desc"]
    assert [d.expr() if d else None for d in descs] == [
        "output[0]", "__grad(self.get_parameter('lin.weight'))", "__grad(self.get_parameter('lin.bias'))", None, None]


def test_plain_data_round_trip_and_printing():
    """to_data/from_data keep names, args, meta and descriptors; print_readable shows seq_nr and grad acc."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    back = from_data(to_data(g))
    assert [(n.name, n.op, n.target, repr(n.args), n.meta.get("seq_nr")) for n in back.nodes] == \
           [(n.name, n.op, n.target, repr(n.args), n.meta.get("seq_nr")) for n in g.nodes]
    assert back.output_node.meta["desc"] == g.output_node.meta["desc"]
    text = g.print_readable()
    assert 'add_1: "f32[4]" = engine.add(expand, mul_1)  # seq_nr=' in text and "is_gradient_acc" in text
    assert back.node("mul").users == {back.node("sin"): None, back.node("add"): None,
                                      back.node("cos"): None} or len(back.node("mul").users) >= 2


def test_joint_view_is_drawn_from_a_saved_trace(tmp_path):
    """A trace carrying a joint graph survives save/load and draws as DOT: a box per node, forward and backward
    clusters, the grad-acc node with a double border."""
    from agdb import tracer
    from agdb.tracer.store.tracefile import load, save
    from agdb.tracer.views.dot import to_dot
    from agdb.tracer.views.joint import with_joint

    with tracer.record() as rec:
        g = capture_joint(f_diamond, leaf(4), leaf(4))
    path = tmp_path / "j.agdb"
    save(with_joint(rec.trace, g), path)
    dot = to_dot(load(path), view="joint")
    assert "cluster_forward" in dot and "cluster_backward" in dot
    assert 'label="add_1\\nengine.add\\nseq_nr' in dot and "grad acc" in dot and "peripheries=2" in dot
    assert dot.count("->") == sum(len(n.all_input_nodes) for n in g.nodes)


def test_bad_targets_raise_clearly_and_leave_the_engine_as_it_was():
    """A non-callable, a function returning no tensor, an unknown mode, or a function that raises: a clear
    error, and afterwards the formula namespace and Function.apply are the engine's own again."""
    import pytest

    from agdb.engine import _ops
    from agdb.engine.autograd import function

    before = (_ops.mul, function.Function.__dict__["apply"])
    with pytest.raises(TypeError, match="function or an nn.Module"):
        capture_joint(3)
    with pytest.raises(TypeError, match="returned no tensor"):
        capture_joint(lambda x: 1.0, leaf(2))
    with pytest.raises(ValueError, match="custom_functions"):
        capture_joint(f_diamond, leaf(2), leaf(2), custom_functions="inline")

    def boom(x):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        capture_joint(boom, leaf(2))
    assert (_ops.mul, function.Function.__dict__["apply"]) == before
    from agdb.engine import _observer

    assert not _observer.op_watchers  # the capture's observer is detached


def test_output_without_grad_has_no_tangent():
    """An output that needs no gradient gets no tangent placeholder and no backward nodes."""
    g = capture_joint(lambda x: x.detach() * 2, leaf(3))
    assert [n.name for n in g.nodes if n.op == "placeholder"] == ["primals_1"]
    assert all(n.meta["partitioner_tag"] == "is_forward" for n in g.nodes if n.op == "call_function")
    assert g.output_node.args[0][1] is None


def test_ops_on_another_thread_are_not_captured():
    """A thread running engine ops while a capture runs (here while the traced function sleeps) adds nothing."""
    import time

    stop, running = threading.Event(), threading.Event()

    def busy():
        y = torch.randn(3, requires_grad=True)
        while not stop.is_set():
            (y * 2).sum().backward()
            running.set()

    def f(x):
        a = x.exp()
        time.sleep(0.05)  # the other thread runs ops and a backward meanwhile
        return a.sum()

    th = threading.Thread(target=busy)
    th.start()
    assert running.wait(60), "the other thread never ran a backward"
    try:
        g = capture_joint(f, leaf(4))
    finally:
        stop.set()
        th.join()
    assert [r[:2] for r in rows(g)] == [("exp", 0), ("sum", 1), ("expand", 1), ("mul", 0)]
