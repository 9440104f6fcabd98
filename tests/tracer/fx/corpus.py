"""Small programs and modules written once against a `torch`-like module T (agdb's engine or real torch).

Each entry returns (callable, args). Used by test_torch_corpus.py to compare capture_joint with torch 2.13.
"""
from __future__ import annotations


def _r(T, *shape, grad=True):
    return T.randn(*shape, requires_grad=grad)


def diamond(T):
    def f(x, w):
        a = x * w
        return (a.sin() + a).sum()
    return f, (_r(T, 4), _r(T, 4))


def square(T):
    return (lambda x: (x * x).sum()), (_r(T, 3),)


def chain(T):
    return (lambda x: x.exp().tanh().sin().sum()), (_r(T, 5),)


def sigmoid_gate(T):
    return (lambda x: (x.sigmoid() * x).sum()), (_r(T, 3, 2),)


def broadcast(T):
    return (lambda x, y: (x + y).mul(y).sum()), (_r(T, 3, 1), _r(T, 4))


def mm(T):
    return (lambda a, b: a.mm(b).relu().sum()), (_r(T, 3, 4), _r(T, 4, 2))


def mean_relu(T):
    return (lambda x: x.relu().mean()), (_r(T, 6),)


def pow_div(T):
    return (lambda x, y: (x.pow(2) / (y.abs() + 1)).sum()), (_r(T, 4), _r(T, 4))


def cat2(T):
    return (lambda a, b: T.cat([a, b]).sin().sum()), (_r(T, 2), _r(T, 3))


def transpose_sum(T):
    return (lambda x: x.t().sum(0).exp().sum()), (_r(T, 2, 3),)


def constant_factory(T):
    return (lambda x: (T.ones(3) * 2 + x).cos().sum()), (_r(T, 3),)


def used_thrice(T):
    def f(x):
        y = x.exp()
        return (y * y + y).sum()
    return f, (_r(T, 3),)


def no_grad_input(T):
    return (lambda x, c: (x * c).tanh().sum()), (_r(T, 3), _r(T, 3, grad=False))


def two_outputs(T):
    def f(x):
        y = x.sin()
        return y.sum(), (y * x).sum()
    return f, (_r(T, 3),)


def unsqueeze_expand(T):
    return (lambda x: x.unsqueeze(0).expand(2, 3).sum()), (_r(T, 3),)


def custom_function(T):
    class Scale(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3

    return (lambda x: Scale.apply(x.exp()).sum()), (_r(T, 3),)


def sub_neg(T):
    return (lambda x, y: (x - y).neg().sum()), (_r(T, 3), _r(T, 3))


def tensor_hook(T):
    def f(x):
        a = x * 3
        a.register_hook(lambda g: g * 7)
        return a.sin().sum()
    return f, (_r(T, 3),)


def reentrant(T):
    class Checkpointed(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with T.enable_grad():
                x2 = x.detach().requires_grad_()
                y = x2.exp()
                (gx,) = T.autograd.grad(y, x2, g)
            return gx

    return (lambda x: Checkpointed.apply(x * 2).sum()), (_r(T, 3),)


def linear(T):
    return T.nn.Linear(3, 2), (T.randn(4, 3),)


def mlp(T):
    return T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 1)), (T.randn(5, 4),)


def with_buffer(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(3, 2)
            self.register_buffer("scale", T.ones(2))

        def forward(self, x):
            return (self.lin(x).relu() * self.scale).sum()

    return M(), (T.randn(4, 3),)


def mse(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(3, 1)

        def forward(self, x, y):
            return T.nn.functional.mse_loss(self.lin(x), y)

    return M(), (T.randn(4, 3), T.randn(4, 1))


def tanh_module(T):
    return T.nn.Sequential(T.nn.Linear(2, 2), T.nn.Tanh()), (T.randn(3, 2),)


def linear_input_grad(T):
    return T.nn.Linear(4, 2), (_r(T, 3, 4),)


def linear_no_bias(T):
    return T.nn.Linear(4, 2, bias=False), (_r(T, 3, 4),)


def linear_3d(T):
    return T.nn.Linear(4, 2), (_r(T, 5, 3, 4),)


def linear_1d(T):
    return T.nn.Linear(4, 2), (_r(T, 4),)


def linear_3d_no_bias(T):
    return T.nn.Linear(4, 2, bias=False), (_r(T, 5, 3, 4),)


def linear_frozen_weight(T):
    lin = T.nn.Linear(4, 2)
    lin.weight.requires_grad_(False)
    return lin, (_r(T, 3, 4),)


def matmul_3d(T):
    return (lambda x, w: (x @ w).sin().sum()), (_r(T, 5, 3, 4), _r(T, 4, 2))


def matmul_vec(T):
    return (lambda x, w: (x @ w).sin().sum()), (_r(T, 4), _r(T, 4, 2))


COMPOSITES = [linear_input_grad, linear_no_bias, linear_3d, linear_1d, linear_3d_no_bias, linear_frozen_weight,
              matmul_3d, matmul_vec]
"""aten's CompositeImplicitAutograd linear and matmul on each of their paths, the input needing a gradient: the
intermediate tensors their autograd nodes save (the weight's transpose, the folded input) must be graph nodes."""

PROGRAMS = [diamond, square, chain, sigmoid_gate, broadcast, mm, mean_relu, pow_div, cat2, transpose_sum,
            constant_factory, used_thrice, no_grad_input, two_outputs, unsqueeze_expand, custom_function, sub_neg,
            tensor_hook, reentrant,
            linear, mlp, with_buffer, mse, tanh_module, *COMPOSITES]
