"""The op dispatch point: every public op passes through it, and it reports `op_called` to observers.

Expectations are derived by hand from the program each test runs (which op, which tensors, which node
PyTorch 2.13 records), not read back from the engine.
"""
from __future__ import annotations

import inspect

import pytest

import agdb.engine.nn.functional as F
from agdb import engine as torch
from agdb.engine._dispatch import REGISTRY, table
from agdb.engine._observer import tensor_uid


class Calls:
    """Records every op_called, and the names of the nodes other than AccumulateGrad created meanwhile."""

    def __init__(self) -> None:
        self.calls: list = []
        self.nodes: list[str] = []

    def op_called(self, call) -> None:
        self.calls.append(call)

    def node_created(self, node) -> None:
        if node.name() != "torch::autograd::AccumulateGrad":
            self.nodes.append(node.name())

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.calls]


def _watch(program) -> Calls:
    log = Calls()
    with torch.add_observer(log):
        program()
    return log


def test_small_program_reports_each_op_in_order_with_its_data_flow():
    """x*2, .sin(), .sum(): three calls in order; each output id is the next input id; shapes, dtypes, nodes."""
    x = torch.ones(2, 3, requires_grad=True)
    out = {}

    def program():
        out["y"] = x * 2
        out["z"] = out["y"].sin()
        out["s"] = out["z"].sum()

    log = _watch(program)
    mul, sin, total = log.calls
    assert log.names == ["mul", "sin", "sum"]
    assert [m.uid for m in mul.inputs] == [tensor_uid(x)]  # the number 2 is not a tensor input
    assert mul.outputs[0].uid == sin.inputs[0].uid == tensor_uid(out["y"])
    assert sin.outputs[0].uid == total.inputs[0].uid == tensor_uid(out["z"])
    assert total.outputs[0].uid == tensor_uid(out["s"])
    assert [(m.shape, m.dtype) for m in mul.inputs + mul.outputs + sin.outputs] == [((2, 3), "float32")] * 3
    assert (total.outputs[0].shape, total.outputs[0].dtype) == ((), "float32")
    assert [c.node.name() for c in log.calls] == ["MulBackward0", "SinBackward0", "SumBackward0"]
    assert mul.node is out["y"].grad_fn and total.node is out["s"].grad_fn
    assert all(c.backward_node is None for c in log.calls)


def test_no_node_under_no_grad_or_when_no_input_requires_grad():
    """The recorded-node field is None under no_grad, for inputs needing no grad, and for comparisons."""
    x = torch.ones(3, requires_grad=True)
    c = torch.ones(3)

    def program():
        with torch.no_grad():
            x * 2
        c * 2
        _ = x > 0
        x * 2

    log = _watch(program)
    assert log.names == ["mul", "mul", "gt", "mul"]
    assert [call.node is None for call in log.calls] == [True, True, True, False]
    assert log.calls[2].outputs[0].dtype == "bool"


def test_several_outputs_and_dtype_changes_are_reported():
    """max(dim) reports values (float32) and indices (int64); .double() is op `to` with a float64 output."""
    x = torch.tensor([[1.0, 5.0], [7.0, 2.0]], requires_grad=True)
    log = _watch(lambda: (x.max(1), x.double()))
    maxed, cast = log.calls
    assert [(m.shape, m.dtype) for m in maxed.outputs] == [((2,), "float32"), ((2,), "int64")]
    assert maxed.node.name() == "MaxBackward0"
    assert (cast.name, cast.inputs[0].dtype, cast.outputs[0].dtype) == ("to", "float32", "float64")
    assert cast.node.name() == "ToCopyBackward0"


def test_operator_and_method_names_are_pytorchs():
    """Operators, reflected operators, in-place forms and properties report PyTorch's op names."""
    x = torch.ones(2, 2)
    a = torch.ones(2, 2)

    def program():
        nonlocal a
        x + 1
        1 + x
        1 - x
        x @ x
        x[0]
        _ = x.T
        a += 1
        a.mul_(2)
        _ = -x
        _ = x == x

    assert _watch(program).names == ["add", "add", "rsub", "matmul", "__getitem__", "numpy_T", "add_", "mul_",
                                     "neg", "eq"]


def test_in_place_op_keeps_the_id_and_bumps_the_version():
    """a.add_(b): the output is `a` itself, one version later; b is the second input."""
    a, b = torch.zeros(3), torch.ones(3)
    log = _watch(lambda: a.add_(b))
    (call,) = log.calls
    assert [m.uid for m in call.inputs] == [tensor_uid(a), tensor_uid(b)]
    assert call.outputs[0].uid == tensor_uid(a)
    assert (call.inputs[0].version, call.outputs[0].version) == (0, 1)


def test_list_arguments_are_flattened_into_inputs():
    """cat([p, q, p]) has three inputs, in list order, p's id twice."""
    p, q = torch.ones(2), torch.zeros(2)
    (call,) = _watch(lambda: torch.cat([p, q, p])).calls
    assert [m.uid for m in call.inputs] == [tensor_uid(p), tensor_uid(q), tensor_uid(p)]
    assert call.outputs[0].shape == (6,)


def test_detached_observer_sees_nothing():
    """After handle.remove(), ops report nothing to the observer."""
    x = torch.ones(2, requires_grad=True)
    log = Calls()
    handle = torch.add_observer(log)
    x * 2
    handle.remove()
    x * 3
    x.sin()
    assert log.names == ["mul"]


def test_nested_ops_report_only_the_outermost_call():
    """linear, flatten, reshape of a non-contiguous tensor, 2 / x and mul_: one call each, inner nodes still made."""
    x = torch.ones(2, 3, requires_grad=True)
    w = torch.ones(4, 3, requires_grad=True)
    b = torch.ones(4, requires_grad=True)
    h = x * 1
    row = w[0]

    log = _watch(lambda: F.linear(x, w, b))
    assert log.names == ["linear"]
    assert log.nodes == ["TBackward0", "AddmmBackward0"]  # PyTorch's linear with a 2-D input
    assert log.calls[0].node.name() == "AddmmBackward0"
    assert [m.uid for m in log.calls[0].inputs] == [tensor_uid(x), tensor_uid(w), tensor_uid(b)]

    assert _watch(lambda: x.flatten()).names == ["flatten"]
    log = _watch(lambda: x.t().reshape(6))  # not viewable: clone then _unsafe_view inside reshape
    assert log.names == ["t", "reshape"] and log.calls[1].node.name() == "UnsafeViewBackward0"
    log = _watch(lambda: 2 / x)  # reciprocal, then mul
    assert log.names == ["div"] and log.nodes == ["ReciprocalBackward0", "MulBackward0"]
    log = _watch(lambda: h.mul_(row))  # saves a clone of h's old value for row's grad, made before the kernel
    assert log.names == ["mul_"] and log.nodes == ["CloneBackward0", "MulBackward0"]
    assert log.calls[0].node is h.grad_fn and log.calls[0].node.name() == "MulBackward0"


def test_ops_an_observer_runs_are_not_reported():
    """An observer that calls ops while told of one does not see its own calls."""
    x = torch.ones(2)

    class Busy(Calls):
        def op_called(self, call) -> None:
            super().op_called(call)
            torch.exp(x)

    log = Busy()
    with torch.add_observer(log):
        x + 1
    assert log.names == ["add"]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_derivative_formulas_are_silent_and_hooks_report_their_node():
    """Under create_graph, formulas and AccumulateGrad report nothing; an op in a tensor hook names the node."""
    x = torch.tensor([2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()  # x.grad exists: the second backward sums into it, recording AddBackward0
    h = x * 3
    loss = (h * h).sum()
    h.register_hook(lambda g: g * 2)
    log = _watch(lambda: loss.backward(create_graph=True))
    assert log.names == ["mul"]
    assert log.calls[0].backward_node is h.grad_fn  # the hook ran as h.grad_fn's tensor pre-hook
    assert "MulBackward0" in log.nodes and "AddBackward0" in log.nodes  # create_graph made nodes silently
    assert x.grad.tolist() == [2 * 2.0 + 36 * 2.0, 2 * 3.0 + 36 * 3.0]  # 2x + 2 * (2 * 9x)


def test_raising_calls_and_notimplemented_operators_are_not_reported():
    """A call that raises reports nothing, nor does an operator deferring to Python with NotImplemented."""
    x = torch.ones(2, 3)

    def program():
        with pytest.raises(RuntimeError):
            x.view(5)
        with pytest.raises(TypeError):
            x + "s"
        x.exp()

    assert _watch(program).names == ["exp"]


def test_ids_are_not_reused_and_repeat_for_the_same_program():
    """Ids only grow (a freed tensor's id is not reused); the same program gets the same relative ids."""
    def run() -> list[int]:
        log = _watch(lambda: [torch.ones(2) * k for k in range(5)])  # each product is freed at once
        return [m.uid for c in log.calls for m in c.inputs + c.outputs]

    first, second = run(), run()
    outputs = first[1::2]
    assert outputs == sorted(set(outputs))
    assert [u - first[0] for u in first] == [u - second[0] for u in second]


def test_unobserved_tensors_get_no_id():
    """Without an observer no tensor is numbered: unobserved programs pay nothing for ids."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    assert not hasattr(x, "_uid") and not hasattr(y, "_uid")


def test_observation_changes_no_node_name_seq_nr_or_grad():
    """The same program with and without an op_called observer makes the same nodes, seq_nrs and grads."""
    def run() -> tuple:
        x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]], requires_grad=True)
        w = torch.tensor([[0.1, 0.2, 0.3], [-0.3, 0.2, 0.1]], requires_grad=True)
        start = torch.autograd._get_sequence_nr()
        h = F.linear(x, w).relu()
        h = h * 2 + 1
        h.add_(x[:, :2])
        loss = (F.softmax(h, dim=1) * h.T.t()).sum() / 2
        seen, order, stack = set(), [], [loss.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            seq = node._sequence_nr()
            order.append((node.name(), seq - start if seq < 2**63 else seq))  # AccumulateGrad: UINT64_MAX
            stack.extend(fn for fn, _ in node.next_functions)
        (gx,) = torch.autograd.grad(loss, [x], create_graph=True)
        gx.sum().backward()
        return order, torch.autograd._get_sequence_nr() - start, x.grad.tolist(), w.grad.tolist()

    plain = run()
    log = Calls()
    with torch.add_observer(log):
        observed = run()
    assert observed == plain
    assert log.names[:4] == ["tensor", "tensor", "linear", "relu"]  # the observer did watch


# -- the registry covers the public surface -------------------------------------------------------------------
NOT_OPS_ENGINE = {"manual_seed", "is_tensor", "get_default_dtype", "no_grad", "enable_grad", "is_grad_enabled",
                  "set_grad_enabled", "add_observer", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
                  "inference_mode", "is_inference_mode_enabled", "save", "load"}
"""engine.* callables that are not ops: settings, predicates, context managers, and torch.save/torch.load (Python
code in torch too, outside its dispatcher)."""

NOT_OPS_TENSOR = {"backward", "register_hook", "register_post_accumulate_grad_hook", "retain_grad",
                  "requires_grad_", "dim", "size", "numel", "nelement", "stride", "is_contiguous",
                  "is_floating_point", "item", "tolist", "numpy", "requires_grad", "is_leaf", "grad", "retains_grad",
                  "output_nr", "shape", "dtype", "device", "is_cuda", "is_xpu", "ndim", "_version", "is_inference",
                  "grad_fn", "_base", "_is_view", "_is_zerotensor", "_set_data"}
"""Tensor methods and properties that are autograd's API or read metadata and Python values (and the setter
of `.data`)."""

PYTHON_PROTOCOL = {"__init__", "__repr__", "__format__", "__hash__", "__bool__", "__float__", "__int__", "__index__",
                   "__len__", "__iter__", "__array__", "__reduce_ex__", "__deepcopy__"}
"""Python's object protocol: conversions and construction, not ops (__iter__ indexes through __getitem__)."""


def _public_callables(namespace) -> list[str]:
    return [n for n, v in vars(namespace).items() if not n.startswith("_") and callable(v)
            and not inspect.isclass(v) and not inspect.ismodule(v)]


def test_every_engine_and_functional_function_is_a_registered_op():
    """Each public function of engine and nn.functional is a registry entry, and is its dispatching wrapper."""
    for name in _public_callables(torch):
        if name in NOT_OPS_ENGINE:
            continue
        assert ("torch", name) in REGISTRY, f"engine.{name} does not pass through the dispatch point"
        assert getattr(torch, name) is table("torch")[name]
    for name in _public_callables(F):
        if name in ("public", "table"):
            continue
        assert ("nn.functional", name) in REGISTRY, f"nn.functional.{name} is not registered"
        assert getattr(F, name) is table("nn.functional")[name]
    assert {"exp", "matmul", "sum", "cat", "softmax", "zeros", "tensor"} <= set(torch.__all__)


def test_every_tensor_method_operator_and_property_is_a_registered_op():
    """Tensor's methods, operators (+, @, +=, ...) and properties are registered, except a named few non-ops."""
    for name, attr in vars(torch.Tensor).items():
        if not (inspect.isfunction(attr) or isinstance(attr, property)):
            continue
        if name in NOT_OPS_TENSOR or name in PYTHON_PROTOCOL:
            continue
        surface = "Tensor.property" if isinstance(attr, property) else "Tensor"
        assert (surface, name) in REGISTRY, f"Tensor.{name} does not pass through the dispatch point"
    for name in ("__add__", "__radd__", "__matmul__", "__iadd__", "add_", "mul", "sum", "view", "__getitem__"):
        assert vars(torch.Tensor)[name] is table("Tensor")[name]
    assert vars(torch.Tensor)["T"].fget is table("Tensor.property")["T"]


def test_an_observer_without_op_called_leaves_ops_on_the_unobserved_path(monkeypatch):
    """A Recorder-like observer (engine points only) must not send ops down the reporting path: while it is
    attached, no op so much as looks for op_called observers (the reporting path's first step)."""
    from agdb.engine import _observer

    class NodesOnly:
        def __init__(self):
            self.created = []

        def node_created(self, node):
            self.created.append(node.name())

    class RefuseOpLookups(dict):
        def get(self, point, default=None):
            assert point != "op_called", "an op took the reporting path with no op_called observer attached"
            return super().get(point, default)

    watcher = NodesOnly()
    handle = torch.add_observer(watcher)
    monkeypatch.setattr(_observer, "dispatch", RefuseOpLookups(_observer.dispatch))
    try:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        (x * 2).sin().sum().backward()
    finally:
        monkeypatch.undo()
        handle.remove()
    # x * 2 makes x's AccumulateGrad first (its edge), then each op its node
    assert watcher.created == ["torch::autograd::AccumulateGrad", "MulBackward0", "SinBackward0", "SumBackward0"]
