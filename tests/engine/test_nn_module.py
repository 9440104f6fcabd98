"""engine.nn's Module plumbing and refusals, with hand-derived expectations (no torch needed)."""
from __future__ import annotations

import pytest

from agdb import engine
from agdb.engine import nn
from agdb.engine.nn import functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        self.head = nn.Linear(3, 1)
        self.register_buffer("steps", engine.zeros(1))

    def forward(self, x):
        return self.head(self.body(x))


def test_registration_order_and_state_dict_round_trip():
    net = Net()
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "head"]
    assert list(net.state_dict()) == ["steps", "body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    other = Net()
    assert repr(other.load_state_dict(net.state_dict())) == "<All keys matched successfully>"
    for a, b in zip(net.parameters(), other.parameters(), strict=True):
        assert a.tolist() == b.tolist() and b.is_leaf and b.requires_grad


def test_parameters_are_leaves_and_repr():
    p = nn.Parameter(engine.tensor([1.0, 2.0]))
    assert p.is_leaf and p.requires_grad and isinstance(p, engine.Tensor)
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert (p * 2).grad_fn.name() == "MulBackward0"


def test_hooks_train_eval_zero_grad():
    net = Net()
    seen = []
    h = net.register_forward_hook(lambda m, args, out: seen.append(tuple(out.shape)))
    net.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    out = net(engine.ones(4, 2))
    assert seen == [(4, 1)]
    h.remove()
    net(engine.ones(4, 2))
    assert seen == [(4, 1)]
    out.sum().backward()
    assert all(q.grad is not None for q in net.parameters())
    net.zero_grad()
    assert all(q.grad is None for q in net.parameters())
    net.eval()
    assert not any(m.training for m in net.modules())
    drop = nn.Dropout(0.5).eval()
    x = engine.ones(3)
    assert drop(x) is x


def test_refusals_are_clear():
    x = engine.tensor([[0.5, -1.0]], requires_grad=True)
    with pytest.raises(NotImplementedError, match="inplace="):
        F.dropout(x, inplace=True)
    with pytest.raises(NotImplementedError, match="class-index targets"):
        F.cross_entropy(x, engine.tensor([[0.3, 0.7]]))
    g, = engine.autograd.grad(F.gelu(x).sum(), x, create_graph=True)
    assert engine.autograd.grad(g.sum(), x, retain_graph=True)[0].shape == (1, 2)  # second order: values
    with pytest.raises(NotImplementedError, match="third-order"):  # its graph would be wrong: refused
        engine.autograd.grad(g.sum(), x, create_graph=True)
    h, = engine.autograd.grad(F.logsigmoid(x).sum(), x, create_graph=True)
    with pytest.raises(NotImplementedError, match="third-order"):
        engine.autograd.grad(h.sum(), x, create_graph=True)
