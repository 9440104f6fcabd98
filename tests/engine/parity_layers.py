"""The layers of CNNs (convolutions, pooling, batch norm) on engine and torch, run by test_layers_parity.py.

Each is `fn(t, p)`; see parity.py. Inputs and weights are written-out float64 data; each program watches the forward
graph, takes the grads of a weighted output (autograd.grad, no create_graph) and records them, so node names,
seq_nrs, order, grads, errors, buffers and their versions are compared.
"""
from __future__ import annotations

from typing import Callable

from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}


def data(*shape: int, seed: int = 0) -> list:
    """Nested lists of `shape` with distinct, irregular values in about [-1.6, 1.6] (no ties within a pooling window
    unless told)."""
    count = 1
    for s in shape:
        count *= s
    flat = [((i * 37 + seed * 11) % 97 - 48) / 30 + 0.001 * i for i in range(count)]

    def build(dims: tuple, offset: int) -> list:
        if len(dims) == 1:
            return flat[offset:offset + dims[0]]
        inner = len(flat) if not dims[1:] else 1
        for d in dims[1:]:
            inner *= d
        return [build(dims[1:], offset + i * inner) for i in range(dims[0])]
    return build(shape, 0)


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def F(t):  # noqa: N802 - torch.nn.functional's usual alias
    return t.nn.functional


def _op(name: str, build: Callable, *shapes: tuple, grad: tuple | None = None) -> None:
    """A functional program: leaves of `shapes` (those flagged in `grad` require grad), the output of build."""
    def fn(t, p):
        flags = grad or (True,) * len(shapes)
        leaves = [p.leaf(f"x{i}", data(*s, seed=i), requires_grad=f)
                  for i, (s, f) in enumerate(zip(shapes, flags, strict=True))]
        live = [x for x in leaves if x.requires_grad]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *live, create_graph=False)
    PROGRAMS[f"layers_{name}"] = fn


def _errors(name: str, cases: Callable) -> None:
    """A program that runs each case of `cases(t, p)` and records its exception, with the counter after each."""
    def fn(t, p):
        for tag, case in cases(t, p).items():
            p.run(tag, case)
            p.counter(tag)
    PROGRAMS[f"layers_errors_{name}"] = fn


# -- convolutions ---------------------------------------------------------------------------------------------
_op("conv2d", lambda t, x, w, b: F(t).conv2d(x, w, b), (2, 2, 5, 4), (3, 2, 3, 2), (3,))
_op("conv2d_no_bias", lambda t, x, w: F(t).conv2d(x, w), (1, 2, 4, 4), (3, 2, 2, 2))
_op("conv2d_stride_padding", lambda t, x, w, b: F(t).conv2d(x, w, b, stride=2, padding=1), (1, 2, 5, 5),
    (2, 2, 3, 3), (2,))
_op("conv2d_pairs", lambda t, x, w, b: F(t).conv2d(x, w, b, stride=(1, 2), padding=(2, 0), dilation=(2, 1)),
    (2, 1, 5, 6), (2, 1, 3, 2), (2,))
_op("conv2d_groups", lambda t, x, w, b: F(t).conv2d(x, w, b, groups=2, padding=1), (1, 4, 4, 3), (6, 2, 2, 2),
    (6,))
_op("conv2d_depthwise", lambda t, x, w: F(t).conv2d(x, w, groups=3, stride=2), (1, 3, 5, 5), (3, 1, 3, 3))
_op("conv2d_same", lambda t, x, w, b: F(t).conv2d(x, w, b, padding="same", dilation=2), (1, 2, 6, 6),
    (2, 2, 3, 3), (2,))
_op("conv2d_valid", lambda t, x, w: F(t).conv2d(x, w, padding="valid"), (1, 2, 4, 4), (1, 2, 3, 3))
_op("conv2d_unbatched", lambda t, x, w, b: F(t).conv2d(x, w, b, padding=1), (2, 4, 4), (3, 2, 3, 3), (3,))
_op("conv2d_weight_only", lambda t, x, w, b: F(t).conv2d(x, w, b), (1, 2, 4, 4), (2, 2, 2, 2), (2,),
    grad=(False, True, False))
_op("conv2d_input_only", lambda t, x, w, b: F(t).conv2d(x, w, b), (1, 2, 4, 4), (2, 2, 2, 2), (2,),
    grad=(True, False, False))
_op("conv1d", lambda t, x, w, b: F(t).conv1d(x, w, b, stride=2, padding=2, dilation=2), (2, 2, 9), (3, 2, 3),
    (3,))
_op("conv1d_groups_unbatched", lambda t, x, w: F(t).conv1d(x, w, groups=2), (4, 6), (2, 2, 3))
_op("conv2d_chain", lambda t, x, w, b: F(t).conv2d(F(t).conv2d(x, w, b, padding=1).relu(), w, b), (1, 2, 5, 5),
    (2, 2, 3, 3), (2,))


def _load(t, p, module, tag, **weights):
    """Copy written-out weights into `module` (float64) and label its parameters for watch()."""
    module.load_state_dict({k: p.const(v) for k, v in weights.items()}, strict=False)
    for name, param in module.named_parameters():
        p.labels[id(param)] = f"{tag}.{name}"
    return module


@program("layers_conv_modules")
def _conv_modules(t, p):
    nn = t.nn
    c2 = nn.Conv2d(2, 4, 3, stride=2, padding=1, groups=2, dtype=t.float64)
    c1 = nn.Conv1d(4, 2, kernel_size=2, bias=False, dilation=2, dtype=t.float64)
    _load(t, p, c2, "c2", weight=data(4, 1, 3, 3), bias=data(4, seed=1))
    _load(t, p, c1, "c1", weight=data(2, 4, 2, seed=2))
    x = p.leaf("x", data(2, 2, 5, 5, seed=3))
    h = c2(x)
    y = c1(h.flatten(2))
    p.watch(y)
    p.counter("forward")
    p.value("y", y)
    p.run("backward", lambda: (y * y).sum().backward())
    p.value("grads", (x.grad, c2.weight.grad, c2.bias.grad, c1.weight.grad))
    for m in (c2, c1, nn.Conv2d(3, 6, (2, 3), padding="same", bias=False), nn.Conv1d(2, 2, 3, padding="valid"),
              nn.Conv2d(1, 1, 1, dilation=(2, 1), padding_mode="zeros")):
        p.value("repr", repr(m))
        p.value("shapes", tuple((n, tuple(q.shape)) for n, q in m.named_parameters()))
        p.value("attrs", (m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups,
                          m.transposed, m.output_padding, m.padding_mode))


def _conv_errors(t, p):
    x = p.leaf("x", data(1, 2, 4, 4))
    w = p.leaf("w", data(3, 2, 3, 3))
    return {
        "channels": lambda: F(t).conv2d(x, p.leaf("w4", data(3, 4, 3, 3))),
        "groups": lambda: F(t).conv2d(x, w, groups=2),
        "kernel too big": lambda: F(t).conv2d(x, p.leaf("w5", data(1, 2, 5, 5))),
        "2d input": lambda: F(t).conv2d(x[0, 0], w),
        "5d input": lambda: F(t).conv2d(x.unsqueeze(0), w),
        "same strided": lambda: F(t).conv2d(x, w, padding="same", stride=2),
        "bad padding string": lambda: F(t).conv2d(x, w, padding="full"),
        "negative padding": lambda: F(t).conv2d(x, w, padding=-1),
        "bias size": lambda: F(t).conv2d(x, w, p.leaf("b", [0.1, 0.2])),
        "weight dtype": lambda: F(t).conv2d(x, w.float()),
        "bias dtype": lambda: F(t).conv2d(x.float(), w.float(), p.leaf("b3", [0.1, 0.2, 0.3])),
        "conv1d 4d": lambda: F(t).conv1d(x, w),
        "module groups": lambda: t.nn.Conv2d(3, 4, 2, groups=2),
        # (padding_mode="mirror" is left out: torch's message prints a set, in an order its .pyc fixed)
        "module same strided": lambda: t.nn.Conv2d(3, 4, 2, padding="same", stride=2),
    }


_errors("conv", _conv_errors)
