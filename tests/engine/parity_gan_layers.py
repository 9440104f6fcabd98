"""A GAN's layers on engine and torch, run by test_gan_layers_parity.py: transposed convolutions (ConvolutionBackward0
with transposed=True), leaky_relu (LeakyReluBackward0; in place LeakyReluBackward1), relu in place (ReluBackward0,
saving the written result) and their modules.

Each is `fn(t, p)`; see parity.py. Data and helpers are parity_layers.py's.
"""
from __future__ import annotations

from typing import Callable

from tests.engine.parity_layers import F, _load, data
from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}


def _op(name: str, build: Callable, *shapes: tuple, grad: tuple | None = None, create_graph: bool = False) -> None:
    def fn(t, p):
        flags = grad or (True,) * len(shapes)
        leaves = [p.leaf(f"x{i}", data(*s, seed=i), requires_grad=f)
                  for i, (s, f) in enumerate(zip(shapes, flags, strict=True))]
        live = [x for x in leaves if x.requires_grad]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *live, create_graph=create_graph)
    PROGRAMS[f"gan_{name}"] = fn


# -- transposed convolutions ----------------------------------------------------------------------------------
_op("conv_transpose2d", lambda t, x, w, b: F(t).conv_transpose2d(x, w, b), (2, 2, 3, 4), (2, 3, 3, 2), (3,))
_op("conv_transpose2d_stride_padding", lambda t, x, w: F(t).conv_transpose2d(x, w, None, 2, 1), (1, 3, 3, 3),
    (3, 2, 4, 4))
_op("conv_transpose2d_output_padding", lambda t, x, w, b: F(t).conv_transpose2d(x, w, b, 2, 1, 1), (1, 2, 3, 3),
    (2, 2, 3, 3), (2,))
_op("conv_transpose2d_groups_dilation", lambda t, x, w, b: F(t).conv_transpose2d(x, w, b, (1, 2), (0, 1), 0, 2,
                                                                                  (2, 1)),
    (1, 4, 3, 4), (4, 1, 2, 3), (2,))
_op("conv_transpose2d_unbatched", lambda t, x, w: F(t).conv_transpose2d(x, w, stride=3), (2, 2, 3), (2, 2, 2, 2))
_op("conv_transpose2d_1x1_input", lambda t, x, w: F(t).conv_transpose2d(x, w, None, 1, 0), (2, 4, 1, 1),
    (4, 3, 4, 4))
_op("conv_transpose2d_weight_only", lambda t, x, w, b: F(t).conv_transpose2d(x, w, b, 2), (1, 2, 3, 3),
    (2, 2, 2, 2), (2,), grad=(False, True, False))
_op("conv_transpose1d", lambda t, x, w, b: F(t).conv_transpose1d(x, w, b, 2, 1, 1), (2, 2, 5), (2, 3, 3), (3,))
_op("conv_transpose_after_conv", lambda t, x, w: F(t).conv_transpose2d(F(t).conv2d(x, w, stride=2), w, stride=2),
    (1, 2, 6, 6), (2, 2, 2, 2))


# -- leaky_relu and in-place relu -----------------------------------------------------------------------------
_op("leaky_relu", lambda t, x: F(t).leaky_relu(x), (3, 4))
_op("leaky_relu_slope", lambda t, x: F(t).leaky_relu(x * 2, 0.2), (2, 5))
_op("leaky_relu_inplace", lambda t, x: F(t).leaky_relu(x * 1.5, 0.2, inplace=True), (2, 5))
_op("leaky_relu_method_chain", lambda t, x: F(t).leaky_relu_(x + 0.25, 0.3).exp(), (4,))
_op("leaky_relu_create_graph", lambda t, x: F(t).leaky_relu(x, 0.1) ** 2, (2, 3), create_graph=True)
_op("relu_inplace", lambda t, x: F(t).relu(x - 0.1, inplace=True), (3, 3))
_op("relu_method_inplace", lambda t, x: (x * 2).relu_() * x, (5,))
_op("torch_relu_inplace", lambda t, x: t.relu_(x.sin()), (2, 2))
_op("relu_inplace_on_view", lambda t, x: _written_view(x * 1, lambda v: v.relu_()), (3, 4))
_op("leaky_relu_inplace_on_view", lambda t, x: _written_view(x * 1, lambda v: F(t).leaky_relu_(v, 0.5)), (3, 4))


def _written_view(h, write):
    write(h[1:, ::2])
    return h


def _program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


@_program("gan_modules")
def _modules(t, p):
    """A DCGAN generator and discriminator step: ConvTranspose2d, BatchNorm2d, ReLU(True); Conv2d, LeakyReLU(0.2,
    True), Sigmoid."""
    nn = t.nn
    g = nn.Sequential(nn.ConvTranspose2d(3, 4, 2, 1, 0, bias=False, dtype=t.float64),
                      nn.BatchNorm2d(4, dtype=t.float64), nn.ReLU(True),
                      nn.ConvTranspose2d(4, 2, 4, 2, 1, bias=False, dtype=t.float64), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(2, 3, 4, 2, 1, bias=False, dtype=t.float64), nn.LeakyReLU(0.2, inplace=True),
                      nn.Conv2d(3, 1, 2, 1, 0, bias=False, dtype=t.float64), nn.Sigmoid())
    _load(t, p, g, "g", **{"0.weight": data(3, 4, 2, 2), "3.weight": data(4, 2, 4, 4, seed=1)})
    _load(t, p, d, "d", **{"0.weight": data(3, 2, 4, 4, seed=2), "2.weight": data(1, 3, 2, 2, seed=3)})
    z = p.leaf("z", data(2, 3, 1, 1, seed=4), requires_grad=False)
    fake = g(z)
    out = d(fake).view(-1)
    p.watch(out)
    p.counter("forward")
    p.value("out", out)
    p.run("backward", lambda: t.nn.BCELoss()(out, t.full((2,), 1.0, dtype=t.float64)).backward())
    p.value("grads", tuple(q.grad for q in (*g.parameters(), *d.parameters())))
    for m in (g[0], g[3], nn.ConvTranspose2d(4, 6, 3, 2, 1, 1, groups=2, dilation=2),
              nn.ConvTranspose1d(2, 3, 3, bias=False), d[1], nn.LeakyReLU(), g[2]):
        p.value("repr", repr(m))
        p.value("shapes", tuple((n, tuple(q.shape)) for n, q in m.named_parameters()))
    p.value("attrs", (g[0].transposed, g[0].output_padding, d[0].transposed, z.is_cuda, z.is_xpu))


@_program("gan_errors")
def _errors(t, p):
    x = p.leaf("x", data(1, 2, 3, 3))
    w = p.leaf("w", data(2, 3, 2, 2))
    cases = {
        "channels": lambda: F(t).conv_transpose2d(x, p.leaf("w3", data(3, 3, 2, 2))),
        "bias size": lambda: F(t).conv_transpose2d(x, w, p.leaf("b", [0.1, 0.2])),
        "2d input": lambda: F(t).conv_transpose2d(x[0, 0], w),
        "weight dtype": lambda: F(t).conv_transpose2d(x, w.float()),
        "relu_ leaf": lambda: x.relu_(),
        "leaky_relu_ leaf": lambda: F(t).leaky_relu_(x),
        "leaky_relu_ negative slope backward": lambda: F(t).leaky_relu(x * 1, -0.5, inplace=True).sum().backward(),
        "relu_ output written": lambda: _write_then_backward(lambda h: h.relu_(), x),
        "leaky_relu_ output written": lambda: _write_then_backward(lambda h: F(t).leaky_relu_(h, 0.2), x),
        "module padding_mode": lambda: t.nn.ConvTranspose2d(2, 2, 2, padding_mode="reflect"),
    }
    for tag, case in cases.items():
        p.run(tag, case)
        p.counter(tag)


def _write_then_backward(op, x):
    """The in-place op saves its written result: writing it again makes the backward refuse."""
    y = op(x * 2)
    y.mul_(2)
    y.sum().backward()
