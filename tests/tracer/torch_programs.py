"""Real PyTorch programs for the bridge's tests (tests/tracer/test_torch_bridge.py).

Each program takes `watch`, which puts a pre-hook of the program's own on every node reachable from the tensors
it is given and logs (name, seq_nr) as nodes run: the order the script observes itself, to compare with the
order the bridge recorded. A line ending in `# <- Name` is where a node named Name must be blamed for a seq_nr.
"""
from __future__ import annotations

import torch


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


INNER_WATCH = [lambda *tensors: None]  # what Reent's backward watches its own graph with


class Reent(torch.autograd.Function):
    """x**2 whose backward runs a backward of its own (reentrant)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            inner = x.detach().requires_grad_()
            s = (inner * inner).sum()  # <- MulBackward0
            INNER_WATCH[0](s)
            s.backward()
        return g * inner.grad


def leaf(*values):
    return torch.tensor(values or (1.0, 2.0), requires_grad=True)


class FailingInner(torch.autograd.Function):
    """The sum of its inputs, whose backward runs an inner backward that a tensor hook fails (and catches):
    the inner call's tasks still queued are left behind, stale."""

    @staticmethod
    def forward(ctx, *xs):
        return sum(x * 1 for x in xs)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            mids = [leaf(1.0) * (i + 2) for i in range(4)]
            mids[-1].register_hook(_raise_on_grad)
            inner = torch.cat(mids).sum()
            INNER_WATCH[0](inner)
            try:
                inner.backward()
            except ValueError:
                pass
        return tuple(g.clone() for _ in ctx.needs_input_grad)


def _raise_on_grad(grad):
    raise ValueError("refused by a tensor hook")


def diamond(watch):
    x = leaf()
    y = x.exp()  # <- ExpBackward0
    z = (y.sin() + y.cos()).sum()  # <- CosBackward0
    watch(z)
    z.backward()


def accumulate_ties(watch):
    p, q, r, s, t = (leaf(float(i)) for i in range(5))
    w = leaf(1.0, 1.0, 1.0, 1.0, 1.0)
    c = torch.cat([p, q, r, s, t])  # <- CatBackward0
    z = (c * w).sum()
    watch(z)
    z.backward()


def inputs_pruning(watch):
    a, b = leaf(), leaf()
    y = (a * 2 + b.exp()).sum()
    watch(y)
    y.backward(inputs=[a])


def grad_of_intermediate(watch):
    x = leaf()
    k = x.exp() * 3
    y = k.sin().sum()
    watch(y)
    torch.autograd.grad(y, [k])
    y2 = (k * k).sum()
    watch(y2)
    y2.backward(inputs=[k])


def two_roots(watch):
    x = leaf()
    a, b = (x * 2).sum(), x.exp().sum()
    watch(a, b)
    torch.autograd.backward([a, b])  # <- GraphRoot


def unused_input(watch):
    x, unused = leaf(), leaf()
    y = (x * x).sum()
    watch(y)
    torch.autograd.grad(y, [x, unused], allow_unused=True)  # <- torch::autograd::Identity


def custom_function(watch):
    x = leaf()
    y = Double.apply(x)  # <- DoubleBackward
    z = (1 - y).sum()  # <- RsubBackward1
    watch(z)
    z.backward()


def hooks(watch):
    x = leaf()
    h = x * 3
    h.register_hook(lambda g: g * 10)
    h.grad_fn.register_prehook(lambda go: (go[0] + 1,))
    h.retain_grad()
    z = h.exp().sum()
    watch(z)
    z.backward()


def reentrant(watch):
    INNER_WATCH[0] = watch
    x = leaf()
    y = Reent.apply(x).sum()  # <- ReentBackward
    w = (x.exp() * 2).sum()
    z = y + w
    watch(z)
    z.backward()


def error_in_backward(watch):
    x = leaf()
    h = x.exp()
    first = h.sin().sum()
    watch(first)
    first.backward(retain_graph=True)  # a clean backward first
    bad = h.cos()
    bad.grad_fn.register_prehook(_raise)
    z = bad.sum()
    watch(z)
    try:
        z.backward()
    except ValueError:
        pass


def _raise(grad_outputs):
    raise ValueError("refused by a hook")


def model_with_optimizer(watch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        loss = model(data).pow(2).mean()
        watch(loss)
        loss.backward()
        opt.step()


def inplace_view(watch):
    a = leaf(1.0, 2.0, 3.0)
    g = a.clone()
    v = g[0:2]
    v.mul_(2)  # <- MulBackward0
    z = g.sum()
    watch(z)
    z.backward()


def failed_inner_backward(watch):
    """The inner call's stale tasks come first in the shared queue (depth INT_MAX), and the outer call pops and
    discards them before its six AccumulateGrads, which tie."""
    INNER_WATCH[0] = watch
    leaves = [leaf(1.0) for _ in range(6)]
    z = FailingInner.apply(*leaves).sum()
    watch(z)
    z.backward()


PROGRAMS = (diamond, accumulate_ties, inputs_pruning, grad_of_intermediate, two_roots, unused_input,
            custom_function, hooks, reentrant, error_in_backward, model_with_optimizer, inplace_view,
            failed_inner_backward)
