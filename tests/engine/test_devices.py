"""Devices as labels (engine-semantics §12.1, §5.2): where tensors live, what `.to` records, where results and
gradients land, and the mixed-device errors.

Expected values come from hand derivations and numpy, from PyTorch's own sources where no GPU can
check them (TensorIterator::compute_types for elementwise ops, c10::impl::check_and_update_common_device
for mm/cat, validate_outputs for grads), and from real torch where a CPU build can answer (torch.device
reprs, `.to` returning self, ToCopyBackward0 for dtype casts). Only cuda:0..cuda:2 are used here, so
the lazily started worker thread of cuda:7 stays untouched for tests/engine/test_threads.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from agdb import engine
from tests import strategies as S
from tests.engine.helpers import acc_of

MIXED_DEVICES = "Expected all tensors to be on the same device, but found at least two devices, {} and {}!"
MM_CHECK = ("Expected all tensors to be on the same device, but got {arg} is on {dev}, different from other "
            "tensors on {common} (when checking argument in method wrapper_CUDA_{op})")


# -- devices on tensors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("factory", [
    lambda d: engine.tensor([1.0, 2.0], device=d),
    lambda d: engine.zeros(2, 3, device=d),
    lambda d: engine.ones(2, device=d),
    lambda d: engine.full((2,), 7.0, device=d),
    lambda d: engine.arange(3, device=d),
    lambda d: engine.randn(2, device=d),
    lambda d: engine.rand(2, device=d),
    lambda d: engine.empty(2, device=d),
])
@pytest.mark.parametrize("dev", ["cpu", "cuda:0", "cuda:1"])
def test_factory_device(factory, dev):
    """Every factory puts its tensor on the `device=` it was given."""
    t = factory(dev)
    assert t.device == dev
    assert str(t.device) == dev


@pytest.mark.torch
@pytest.mark.parametrize("dev", ["cpu", "cuda:1"])
def test_tensor_float64_from_python_floats_is_exact(dev):
    """`tensor([1.3, -2.2], dtype=float64, device=...)` holds the exact doubles, as torch.tensor does."""
    torch = pytest.importorskip("torch")
    data = [1.3, -2.2, 0.1]
    assert torch.tensor(data, dtype=torch.float64).tolist() == data
    assert engine.tensor(data, dtype=engine.float64, device=dev).tolist() == data


def test_factory_default_device_is_cpu():
    """A factory without `device=` makes a CPU tensor."""
    assert engine.ones(2).device == "cpu"
    assert engine.tensor(3.0).device == "cpu"


def test_factory_device_object_and_bare_cuda():
    """`device=engine.device("cuda:1")` works, and a bare "cuda" means the current device cuda:0."""
    assert engine.ones(2, device=engine.device("cuda:1")).device == "cuda:1"
    assert engine.ones(2, device="cuda").device == "cuda:0"


def test_like_factories_inherit_device():
    """zeros_like / ones_like take the source tensor's device unless told otherwise."""
    src = engine.ones(2, device="cuda:1")
    assert engine.zeros_like(src).device == "cuda:1"
    assert engine.ones_like(src).device == "cuda:1"
    assert engine.zeros_like(src, device="cpu").device == "cpu"


@pytest.mark.parametrize("spec,type_,index", [("cpu", "cpu", None), ("cuda:0", "cuda", 0), ("cuda:1", "cuda", 1)])
def test_device_object_fields(spec, type_, index):
    """`t.device` has torch.device's type and index (cpu has index None) and equals its string."""
    d = engine.ones(1, device=spec).device
    assert isinstance(d, engine.device)
    assert (d.type, d.index) == (type_, index)
    assert d == spec and d == engine.device(spec)
    assert d != ("cuda:2" if spec != "cuda:2" else "cpu")


@pytest.mark.torch
@pytest.mark.parametrize("spec", ["cpu", "cuda:0", "cuda:1"])
def test_device_repr_and_str_match_torch(spec):
    """repr() and str() of a device are those of torch.device (checked on the CPU build)."""
    torch = pytest.importorskip("torch")
    ours, theirs = engine.ones(1, device=spec).device, torch.device(spec)
    assert repr(ours) == repr(theirs)
    assert str(ours) == str(theirs)


def test_tensor_repr_names_non_cpu_device():
    """A non-CPU tensor's repr carries `device='cuda:1'`, as torch prints it; a CPU one does not."""
    assert "device='cuda:1'" in repr(engine.ones(2, device="cuda:1"))
    assert "device" not in repr(engine.ones(2))


# -- .to / .cuda / .cpu -------------------------------------------------------------------------------------
def test_to_other_device_records_tocopy_with_leaf_edge():
    """`x.to("cuda:1")` on a leaf: new tensor on cuda:1, grad_fn ToCopyBackward0, next_functions ((Acc(x), 0),)."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cuda:1")
    assert y is not x
    assert y.device == "cuda:1" and x.device == "cpu"
    assert y.tolist() == [1.0, 2.0]
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "ToCopyBackward0"
    ((child, nr),) = y.grad_fn.next_functions
    assert child is acc_of(x) and nr == 0


def test_to_on_non_leaf_points_at_producer():
    """ToCopyBackward0 of a non-leaf points at the producing node, input_nr 0."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    e = x.exp()
    y = e.to("cuda:0")
    assert y.grad_fn.next_functions == ((e.grad_fn, 0),)
    z = y.to("cuda:1")
    assert z.grad_fn.name() == "ToCopyBackward0"
    assert z.grad_fn.next_functions == ((y.grad_fn, 0),)


def test_cuda_and_cpu_methods():
    """`.cuda()` goes to cuda:0 (even from cuda:1), `.cuda(1)` to cuda:1, `.cpu()` back, each as ToCopyBackward0."""
    x = engine.tensor([3.0], requires_grad=True)
    a = x.cuda()
    b = a.cuda(1)
    c = b.cuda()  # Tensor.cuda() with no index means the current device, cuda:0, even from cuda:1
    d = c.cpu()
    assert [t.device for t in (a, b, c, d)] == ["cuda:0", "cuda:1", "cuda:0", "cpu"]
    assert all(t.grad_fn.name() == "ToCopyBackward0" for t in (a, b, c, d))
    assert d.grad_fn.next_functions[0][0] is c.grad_fn
    assert c.grad_fn.next_functions[0][0] is b.grad_fn
    assert b.grad_fn.next_functions[0][0] is a.grad_fn


def test_to_same_device_returns_self():
    """`.to()` to the device (and dtype) a tensor already has returns the tensor itself, recording nothing."""
    x = engine.ones(2, device="cuda:1", requires_grad=True)
    assert x.to("cuda:1") is x
    assert x.cuda(1) is x
    c = engine.ones(2, requires_grad=True)
    assert c.cpu() is c and c.to("cpu") is c


def test_to_copy_true_makes_a_new_node_on_same_device():
    """`.to(dev, copy=True)` on the same device still copies and records ToCopyBackward0."""
    x = engine.ones(2, device="cuda:0", requires_grad=True)
    y = x.to("cuda:0", copy=True)
    assert y is not x and y.device == "cuda:0"
    assert y.grad_fn.name() == "ToCopyBackward0"


def test_to_another_tensor_takes_its_device_and_dtype():
    """`.to(other)` takes other's device and dtype."""
    x = engine.tensor([1.5], dtype=engine.float64, requires_grad=True)
    other = engine.zeros(1, dtype=engine.float32, device="cuda:1")
    y = x.to(other)
    assert y.device == "cuda:1" and y.dtype == engine.float32
    assert y.grad_fn.name() == "ToCopyBackward0"


def test_to_device_and_dtype_positional():
    """`.to("cuda:0", float32)` changes both; the values are kept (cast to float32)."""
    x = engine.tensor([0.1, 0.2], dtype=engine.float64)
    y = x.to("cuda:0", engine.float32)
    assert y.device == "cuda:0" and y.dtype == engine.float32
    np.testing.assert_array_equal(np.array(y.tolist(), dtype=np.float32), np.array([0.1, 0.2], dtype=np.float32))


def test_to_without_grad_records_nothing():
    """`.to` of a tensor that does not require grad, or under no_grad, has no grad_fn."""
    assert engine.ones(2).to("cuda:0").grad_fn is None
    x = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        y = x.to("cuda:1")
    assert y.grad_fn is None and not y.requires_grad and y.device == "cuda:1"


def test_to_bumps_sequence_counter_once():
    """ToCopyBackward0 is an ordinary generated node: it takes the counter's value and bumps it by one (engine-semantics §1.4)."""
    x = engine.ones(2, requires_grad=True)
    before = engine.autograd._get_sequence_nr()
    y = x.to("cuda:0")
    assert y.grad_fn._sequence_nr() == before
    assert engine.autograd._get_sequence_nr() == before + 1


@pytest.mark.torch
def test_to_dtype_only_matches_torch():
    """A dtype-only `.to` on CPU records ToCopyBackward0 with the leaf edge, exactly as torch does."""
    torch = pytest.importorskip("torch")
    rows = []
    for t in (engine, torch):
        x = t.ones(2, dtype=t.float64, requires_grad=True)
        y = x.to(t.float32)
        ((child, nr),) = y.grad_fn.next_functions
        rows.append((y.grad_fn.name(), child is t.autograd.graph.get_gradient_edge(x).node, nr,
                     x.to(t.float64) is x, x.to("cpu") is x, x.cpu() is x, y.dtype == t.float32))
    assert rows[0] == rows[1] == ("ToCopyBackward0", True, 0, True, True, True, True)


# -- where results live --------------------------------------------------------------------------------
@pytest.mark.parametrize("dev", ["cuda:0", "cuda:1"])
def test_unary_reduction_and_view_results_stay_on_device(dev):
    """Unary ops, reductions, views and matmul of tensors on one device produce tensors on that device."""
    a = engine.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    results = [a.exp(), a.sin(), a.sum(), a.mean(), a.t(), a.reshape(4), a[0], a.mm(a), a.relu(),
               engine.cat([a, a]), engine.stack([a, a]), a.clone(), a.sum(0)]
    assert [r.device for r in results] == [dev] * len(results)


@pytest.mark.parametrize("dev", ["cuda:0", "cuda:1"])
def test_binary_same_device(dev):
    """Two tensors on the same device combine there."""
    a = engine.tensor([1.0, 2.0], device=dev)
    b = engine.tensor([3.0, 4.0], device=dev)
    for r in (a + b, a * b, a - b, a / b, a.maximum(b)):
        assert r.device == dev
    assert (a * b).tolist() == [3.0, 8.0]


@pytest.mark.parametrize("dev", ["cuda:0", "cuda:1"])
def test_python_numbers_mix_with_any_device(dev):
    """A Python number is a wrapped CPU scalar: it mixes with any device, on either side."""
    a = engine.tensor([1.0, 2.0], device=dev)
    for r in (a * 2, 2 * a, a + 1.5, 1.5 - a, a / 4, a ** 2):
        assert r.device == dev
    assert (2 * a).tolist() == [2.0, 4.0]


@pytest.mark.parametrize("dev", ["cuda:0", "cuda:1"])
def test_cpu_zero_dim_tensor_mixes_with_any_device(dev):
    """A CPU 0-dim tensor mixes with a tensor on any device, on either side; the result is on that device."""
    a = engine.tensor([1.0, 2.0], device=dev)
    s = engine.tensor(3.0)
    for r in (s * a, a * s, s + a, a - s):
        assert r.device == dev
    assert (s * a).tolist() == [3.0, 6.0]


def test_zero_dim_tensors_on_same_device_and_cpu_scalar():
    """A cuda 0-dim tensor with a CPU 0-dim tensor is on cuda; two CPU 0-dim tensors stay on CPU."""
    assert (engine.tensor(2.0, device="cuda:1") * engine.tensor(3.0)).device == "cuda:1"
    assert (engine.tensor(3.0) * engine.tensor(2.0, device="cuda:1")).device == "cuda:1"
    assert (engine.tensor(3.0) * engine.tensor(2.0)).device == "cpu"


# -- mixed-device errors --------------------------------------------------------------------------------
def test_two_cuda_devices_error():
    """cuda:0 + cuda:1 → the TensorIterator message naming cuda:0 then cuda:1 (and the reverse order reversed)."""
    a = engine.ones(2, device="cuda:0")
    b = engine.ones(2, device="cuda:1")
    with pytest.raises(RuntimeError) as ei:
        a + b
    assert str(ei.value) == MIXED_DEVICES.format("cuda:0", "cuda:1")
    with pytest.raises(RuntimeError) as ei:
        b * a
    assert str(ei.value) == MIXED_DEVICES.format("cuda:1", "cuda:0")


def test_cuda_then_cpu_dimensioned_error():
    """cuda:0 tensor + CPU tensor with dims → "... cuda:0 and cpu!"."""
    with pytest.raises(RuntimeError) as ei:
        engine.ones(2, device="cuda:0") + engine.ones(2)
    assert str(ei.value) == MIXED_DEVICES.format("cuda:0", "cpu")


def test_cpu_then_cuda_dimensioned_error_names_cuda_first():
    """CPU tensor + cuda:0 tensor → "... cuda:0 and cpu!" (cuda first)."""
    # TensorIterator::compute_types takes the first non-CPU operand as the common device and reports
    # the other operand against it, whatever the argument order.
    with pytest.raises(RuntimeError) as ei:
        engine.ones(2) + engine.ones(2, device="cuda:0")
    assert str(ei.value) == MIXED_DEVICES.format("cuda:0", "cpu")


def test_cuda_zero_dim_does_not_move_to_cpu():
    """Only CPU 0-dim tensors move: a cuda 0-dim tensor with a dimensioned CPU tensor is an error, cuda first."""
    with pytest.raises(RuntimeError) as ei:
        engine.tensor(1.0, device="cuda:0") * engine.ones(2)
    assert str(ei.value) == MIXED_DEVICES.format("cuda:0", "cpu")


def test_mm_cpu_cuda_error():
    """mm(cpu, cuda:0) → the dispatcher's device check naming mat2 and wrapper_CUDA_mm."""
    with pytest.raises(RuntimeError) as ei:
        engine.mm(engine.ones(2, 2), engine.ones(2, 2, device="cuda:0"))
    assert str(ei.value) == MM_CHECK.format(arg="mat2", dev="cuda:0", common="cpu", op="mm")


def test_mm_cuda_cpu_and_two_cudas_error():
    """mm(cuda:0, cpu) and mm(cuda:0, cuda:1): mat2 is reported against the first argument's device."""
    with pytest.raises(RuntimeError) as ei:
        engine.ones(2, 2, device="cuda:0").mm(engine.ones(2, 2))
    assert str(ei.value) == MM_CHECK.format(arg="mat2", dev="cpu", common="cuda:0", op="mm")
    with pytest.raises(RuntimeError) as ei:
        engine.mm(engine.ones(2, 2, device="cuda:0"), engine.ones(2, 2, device="cuda:1"))
    assert str(ei.value) == MM_CHECK.format(arg="mat2", dev="cuda:1", common="cuda:0", op="mm")


def test_cat_mixed_devices_error_names_the_list():
    """cat([cuda:0, cpu]) names the bad element `tensors`, not `tensors[1]`."""
    # check_and_update_common_device over an ITensorListRef passes the same argName for every element.
    with pytest.raises(RuntimeError) as ei:
        engine.cat([engine.ones(2, device="cuda:0"), engine.ones(2)])
    assert str(ei.value) == MM_CHECK.format(arg="tensors", dev="cpu", common="cuda:0", op="cat")


@pytest.mark.parametrize("op", ["mul", "mm", "cat"])
def test_failed_mixed_device_op_still_takes_a_seq_nr(op):
    """A failed mixed-device op on requiring inputs still moves the counter by 1."""
    # The autograd kernel creates the node before redispatching to the device kernel whose check raises;
    # the CPU analog (a failed shape check) moves torch's counter by 1 for mul, mm and cat, see below.
    a = engine.ones(2, 2, device="cuda:0", requires_grad=True)
    b = engine.ones(2, 2, device="cuda:1", requires_grad=True)
    call = {"mul": lambda: a * b, "mm": lambda: engine.mm(a, b), "cat": lambda: engine.cat([a, b])}[op]
    before = engine.autograd._get_sequence_nr()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        call()
    assert engine.autograd._get_sequence_nr() == before + 1


@pytest.mark.torch
def test_failed_op_takes_a_seq_nr_like_torch():
    """Failed shape checks in mul, mm, cat and stack move the counter by 1, as on torch."""
    torch = pytest.importorskip("torch")

    def bumps(t):
        calls = [lambda: t.ones(2, requires_grad=True) * t.ones(3),
                 lambda: t.mm(t.ones(2, 2, requires_grad=True), t.ones(3, 3)),
                 lambda: t.cat([t.ones(2, 2, requires_grad=True), t.ones(3, 3)], 1),
                 lambda: t.stack([t.ones(2, requires_grad=True), t.ones(3)])]
        out = []
        for call in calls:
            before = t.autograd._get_sequence_nr()
            with pytest.raises(RuntimeError):
                call()
            out.append(t.autograd._get_sequence_nr() - before)
        return out

    assert bumps(torch) == [1, 1, 1, 1]
    assert bumps(engine) == bumps(torch)


# -- gradients come back to the right devices ----------------------------------------------------------------
def test_cpu_leaf_through_two_devices_gets_cpu_grad():
    """x (cpu) → cuda:0 → cuda:1 → cpu: x.grad is on cpu and equals the hand derivative 2·exp(2x)·... ."""
    xs = np.array([0.5, -1.0, 2.0])
    x = engine.tensor(xs.tolist(), dtype=engine.float64, requires_grad=True)
    a = x.to("cuda:0").exp()           # exp(x) on cuda:0
    b = (a * a).to("cuda:1").sin()     # sin(exp(2x)) on cuda:1
    loss = b.cpu().sum()
    loss.backward()
    assert x.grad.device == "cpu"
    expected = np.cos(np.exp(2 * xs)) * 2 * np.exp(2 * xs)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_intermediate_grads_live_on_their_tensors_devices():
    """retain_grad on tensors on cuda:0 / cuda:1 / cpu gives grads on those same devices."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    a = x.to("cuda:0")
    a.retain_grad()
    b = (a * 3).to("cuda:1")
    b.retain_grad()
    c = b.cpu()
    c.retain_grad()
    seen = []
    b.register_hook(lambda g: seen.append(g.device))
    (c * c).sum().backward()
    assert (a.grad.device, b.grad.device, c.grad.device) == ("cuda:0", "cuda:1", "cpu")
    assert seen == ["cuda:1"]
    # c = 3x, loss = Σ c², dloss/dc = 2c = 6x, dloss/da = 3·6x = 18x
    assert c.grad.tolist() == [6.0, 12.0]
    assert b.grad.tolist() == [6.0, 12.0]
    assert a.grad.tolist() == [18.0, 36.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_to_dtype_and_device_grad_comes_back_in_source_dtype():
    """ToCopyBackward0 casts the grad back to the source's dtype and device (float32 cuda:1 → float64 cpu)."""
    x = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    y = x.to("cuda:1", engine.float32)
    seen = []
    y.register_hook(lambda g: seen.append((g.device, g.dtype)))
    (y * 2).sum().backward()
    assert seen == [("cuda:1", engine.float32)]
    assert x.grad.device == "cpu" and x.grad.dtype == engine.float64
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("dev", ["cuda:0", "cuda:1"])
def test_device_leaf_grad_on_its_device(dev):
    """A leaf created on a cuda device gets its .grad on that device: d/dw Σ (w·w)·3 = 6w."""
    w = engine.tensor([1.0, -2.0], device=dev, requires_grad=True)
    ((w * w) * 3).sum().backward()
    assert w.grad.device == dev
    assert w.grad.tolist() == [6.0, -12.0]


def test_device_leaf_grad_through_cpu():
    """A cuda:1 leaf used on the CPU (`.cpu()`) still accumulates its grad on cuda:1."""
    w = engine.tensor([1.0, 2.0], device="cuda:1", requires_grad=True)
    (w.cpu() * engine.tensor([5.0, 7.0])).sum().backward()
    assert w.grad.device == "cuda:1"
    assert w.grad.tolist() == [5.0, 7.0]


def test_cpu_scalar_operand_grad_moves_back_to_cpu():
    """CPU 0-dim s · cuda:0 v: s.grad (Σv) is moved back to cpu, v's grad is s."""
    # validate_outputs moves a 0-dim grad to the input's device (engine-semantics §5.2).
    s = engine.tensor(2.0, requires_grad=True)
    v0 = engine.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = v0.to("cuda:0")
    (s * v).sum().backward()
    assert s.grad.device == "cpu" and s.grad.tolist() == 6.0
    assert v0.grad.device == "cpu" and v0.grad.tolist() == [2.0, 2.0, 2.0]


def test_custom_backward_zero_dim_grad_on_wrong_device_is_moved():
    """A custom backward returning a 0-dim grad on cuda:0 for a CPU input: validate_outputs moves it to cpu."""

    class F(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return (g * 5).to("cuda:0")

    s = engine.tensor(1.0, requires_grad=True)
    F.apply(s).backward()
    assert s.grad.device == "cpu" and s.grad.tolist() == 5.0


def test_custom_backward_dimensioned_grad_on_wrong_device_errors():
    """A custom backward's dimensioned grad on the wrong device fails validate_outputs."""

    class WrongDev(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g.to("cuda:0")

    x = engine.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        WrongDev.apply(x).sum().backward()
    assert str(ei.value) == ("Function WrongDevBackward returned an invalid gradient at index 0 - expected device "
                             "cpu but got cuda:0")
    assert x.grad is None


@given(S.arrays(S.shapes(min_dims=1, max_dims=2)))
def test_device_hops_do_not_change_gradients(xs):
    """For any x, Σ tanh(x→cuda:0)·(x→cuda:1→cuda:0) has the grad tanh'(x)·x + tanh(x), on cpu, whatever the hops."""
    x = engine.tensor(xs, requires_grad=True)  # from the float64 array itself
    loss = (x.to("cuda:0").tanh() * x.to("cuda:1").to("cuda:0")).cpu().sum()
    loss.backward()
    t = np.tanh(xs)
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), (1 - t * t) * xs + t, rtol=1e-12, atol=1e-15)


# -- node.device() -----------------------------------------------------------------------------------------
def test_tocopy_node_device_is_its_output_device():
    """ToCopyBackward0.device() is the device of the copy it made (its input metadata), not the source's."""
    x = engine.ones(2, requires_grad=True)
    a = x.to("cuda:1")
    b = a.to("cuda:0")
    c = b.cpu()
    d = a.to(engine.float32)  # dtype-only copy on cuda:1
    assert a.grad_fn.device() == "cuda:1"
    assert b.grad_fn.device() == "cuda:0"
    assert c.grad_fn.device() == "cpu"
    assert d.grad_fn.device() == "cuda:1"


def test_ordinary_node_device():
    """A node of an op on cuda:1 reports cuda:1; a node of a CPU op reports cpu."""
    x = engine.ones(2, requires_grad=True)
    assert x.exp().grad_fn.device() == "cpu"
    assert x.to("cuda:1").exp().grad_fn.device() == "cuda:1"
    assert x.to("cuda:1").sum().grad_fn.device() == "cuda:1"


def test_accumulate_grad_device_is_its_leafs_device():
    """AccumulateGrad of a cuda:2 leaf reports cuda:2; of a CPU leaf, cpu."""
    w = engine.ones(2, device="cuda:2", requires_grad=True)
    x = engine.ones(2, requires_grad=True)
    assert acc_of(w).device() == "cuda:2"
    assert acc_of(x).device() == "cpu"


def test_node_device_is_first_non_cpu_output():
    """A custom Function with outputs (cpu, cuda:1): its node's device() is cuda:1, the first non-CPU one."""

    class Split(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.cpu() * 1, a.to("cuda:1") * 1

        @staticmethod
        def backward(ctx, g1, g2):
            return g1.to("cuda:0") + g2.to("cuda:0")

    x = engine.tensor([1.0, 2.0], requires_grad=True)
    o1, o2 = Split.apply(x.to("cuda:0"))
    assert (o1.device, o2.device) == ("cpu", "cuda:1")
    assert o1.grad_fn is o2.grad_fn
    assert o1.grad_fn.device() == "cuda:1"
    (o1.sum() + o2.cpu().sum()).backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_distributed_imports_and_refuses_process_groups():
    """`torch.distributed` and `torch.nn.parallel` import (a script's single-process path runs); starting a
    process group or wrapping a module in DistributedDataParallel is refused with the bridge command."""
    assert engine.distributed.is_initialized() is False
    for call in (lambda: engine.distributed.init_process_group("gloo"), engine.distributed.destroy_process_group,
                 lambda: engine.nn.parallel.DistributedDataParallel(engine.nn.Linear(1, 1))):
        with pytest.raises(NotImplementedError, match="agdb torch SCRIPT"):
            call()
