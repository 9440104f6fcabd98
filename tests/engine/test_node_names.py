"""Backward node names and next_functions slots, from the table PyTorch 2.13 was measured with (issue 2 §2)."""
from __future__ import annotations

import pytest

import agdb.engine.nn.functional as F
from agdb import engine as torch

ACC = "torch::autograd::AccumulateGrad"


def _x(*shape):
    return torch.ones(*shape, requires_grad=True)


def _slots(t):
    """The next_functions as names, None for an empty slot."""
    return tuple(None if n is None else n.name() for n, _ in t.grad_fn.next_functions)


X, Y = _x(2, 3), _x(2, 3)
V, W = _x(3), _x(3)
M = _x(3, 4)

CASES = [
    ("x+y", lambda: X + Y, "AddBackward0", (ACC, ACC)),
    ("x+2", lambda: X + 2, "AddBackward0", (ACC, None)),
    ("2+x", lambda: 2 + X, "AddBackward0", (ACC, None)),
    ("x-y", lambda: X - Y, "SubBackward0", (ACC, ACC)),
    ("x-2", lambda: X - 2, "SubBackward0", (ACC, None)),
    ("2-x", lambda: 2 - X, "RsubBackward1", (ACC,)),
    ("x*y", lambda: X * Y, "MulBackward0", (ACC, ACC)),
    ("x*2", lambda: X * 2, "MulBackward0", (ACC, None)),
    ("x/y", lambda: X / Y, "DivBackward0", (ACC, ACC)),
    ("x/2", lambda: X / 2, "DivBackward0", (ACC, None)),
    ("2/x", lambda: 2 / X, "MulBackward0", ("ReciprocalBackward0", None)),
    ("-x", lambda: -X, "NegBackward0", (ACC,)),
    ("x**2", lambda: X ** 2, "PowBackward0", (ACC,)),
    ("x.pow(3)", lambda: X.pow(3), "PowBackward0", (ACC,)),
    ("x**y", lambda: X ** Y, "PowBackward1", (ACC, ACC)),
    ("2**x", lambda: 2 ** X, "PowBackward2", (ACC,)),
    ("exp", lambda: X.exp(), "ExpBackward0", (ACC,)),
    ("log", lambda: X.log(), "LogBackward0", (ACC,)),
    ("abs", lambda: X.abs(), "AbsBackward0", (ACC,)),
    ("sin", lambda: X.sin(), "SinBackward0", (ACC,)),
    ("cos", lambda: X.cos(), "CosBackward0", (ACC,)),
    ("tanh", lambda: X.tanh(), "TanhBackward0", (ACC,)),
    ("sigmoid", lambda: X.sigmoid(), "SigmoidBackward0", (ACC,)),
    ("relu", lambda: X.relu(), "ReluBackward0", (ACC,)),
    ("sqrt", lambda: X.sqrt(), "SqrtBackward0", (ACC,)),
    ("sum()", lambda: X.sum(), "SumBackward0", (ACC,)),
    ("sum(dim)", lambda: X.sum(1), "SumBackward1", (ACC,)),
    ("mean()", lambda: X.mean(), "MeanBackward0", (ACC,)),
    ("mean(dim)", lambda: X.mean(0), "MeanBackward1", (ACC,)),
    ("2-D @", lambda: X @ M, "MmBackward0", (ACC, ACC)),
    ("mm", lambda: torch.mm(X, M), "MmBackward0", (ACC, ACC)),
    ("matmul", lambda: torch.matmul(X, M), "MmBackward0", (ACC, ACC)),
    ("1-D·1-D", lambda: V @ W, "DotBackward0", (ACC, ACC)),
    ("2-D·1-D", lambda: X @ V, "MvBackward0", (ACC, ACC)),
    ("t()", lambda: X.t(), "TBackward0", (ACC,)),
    (".T", lambda: X.T, "PermuteBackward0", (ACC,)),
    ("transpose", lambda: X.transpose(0, 1), "TransposeBackward0", (ACC,)),
    ("view", lambda: X.view(6), "ViewBackward0", (ACC,)),
    ("reshape", lambda: X.reshape(3, 2), "ViewBackward0", (ACC,)),
    ("unsqueeze", lambda: X.unsqueeze(0), "UnsqueezeBackward0", (ACC,)),
    ("squeeze(d)", lambda: X.unsqueeze(0).squeeze(0), "SqueezeBackward1", ("UnsqueezeBackward0",)),
    ("x[0]", lambda: X[0], "SelectBackward0", (ACC,)),
    ("x[0:1]", lambda: X[0:1], "SliceBackward0", (ACC,)),
    ("cat", lambda: torch.cat([X, Y]), "CatBackward0", (ACC, ACC)),
    ("stack", lambda: torch.stack([X, Y]), "StackBackward0", (ACC, ACC)),
    ("clone", lambda: X.clone(), "CloneBackward0", (ACC,)),
    ("expand", lambda: V.expand(2, 3), "ExpandBackward0", (ACC,)),
    ("max()", lambda: X.max(), "MaxBackward1", (ACC,)),
    ("maximum", lambda: torch.maximum(X, Y), "MaximumBackward0", (ACC, ACC)),
    ("where", lambda: torch.where(X > 0, X, Y), "WhereBackward0", (ACC, ACC)),
    ("softmax", lambda: X.softmax(1), "SoftmaxBackward0", (ACC,)),
    ("log_softmax", lambda: X.log_softmax(1), "LogSoftmaxBackward0", (ACC,)),
    ("mse_loss", lambda: F.mse_loss(X, Y), "MseLossBackward0", (ACC, ACC)),
    ("linear", lambda: F.linear(X, _x(4, 3), _x(4)), "AddmmBackward0", (ACC, ACC, "TBackward0")),
]


@pytest.mark.parametrize("label,build,name,slots", CASES, ids=[c[0] for c in CASES])
def test_node_name_and_slots(label, build, name, slots):
    """Each op records the node PyTorch 2.13 records, with one next_functions slot per tensor input."""
    out = build()
    assert out.grad_fn.name() == name
    assert _slots(out) == slots


def test_accumulate_grad_name_and_edges():
    """A leaf's node is torch::autograd::AccumulateGrad with no next functions."""
    acc = (X * 2).grad_fn.next_functions[0][0]
    assert acc.name() == ACC
    assert acc.next_functions == ()
    assert acc.variable is X


def test_linear_weight_transposed_before_addmm():
    """linear(x, w, b) records TBackward0 on the weight, then AddmmBackward0 with edges (bias, input, w.t())."""
    w, b = _x(4, 3), _x(4)
    out = F.linear(X, w, b)
    bias_edge, input_edge, weight_edge = out.grad_fn.next_functions
    assert bias_edge[0].variable is b and input_edge[0].variable is X
    assert weight_edge[0].name() == "TBackward0" and weight_edge[0].next_functions[0][0].variable is w
    assert out.grad_fn._sequence_nr() == weight_edge[0]._sequence_nr() + 1


def test_reciprocal_then_mul_for_scalar_over_tensor():
    """2/x records ReciprocalBackward0 and then MulBackward0, two consecutive seq_nrs."""
    out = 2 / X
    recip = out.grad_fn.next_functions[0][0]
    assert out.grad_fn._sequence_nr() == recip._sequence_nr() + 1


def test_ops_without_grad_record_nothing():
    """Comparisons and ops on tensors that do not require grad have no grad_fn."""
    assert (X > 0).grad_fn is None
    assert (torch.ones(2) * 3).grad_fn is None
    with torch.no_grad():
        assert (X * 3).grad_fn is None
