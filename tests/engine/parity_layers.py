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


# -- pooling --------------------------------------------------------------------------------------------------
_op("max_pool2d", lambda t, x: F(t).max_pool2d(x, 2), (2, 2, 5, 4))
_op("max_pool2d_stride_padding", lambda t, x: F(t).max_pool2d(x, 3, stride=2, padding=1), (1, 2, 6, 5))
_op("max_pool2d_dilation_ceil", lambda t, x: F(t).max_pool2d(x, (2, 3), (2, 1), (1, 0), dilation=2,
                                                              ceil_mode=True), (1, 1, 7, 8))
_op("max_pool2d_unbatched", lambda t, x: F(t).max_pool2d(x, 2, 1), (2, 4, 4))
_op("max_pool2d_indices", lambda t, x: F(t).max_pool2d(x, 2, return_indices=True)[0] * 3, (1, 2, 4, 4))
_op("avg_pool2d", lambda t, x: F(t).avg_pool2d(x, 2), (2, 2, 5, 4))
_op("avg_pool2d_padding", lambda t, x: F(t).avg_pool2d(x, 3, stride=2, padding=1), (1, 2, 6, 5))
_op("avg_pool2d_no_pad_count", lambda t, x: F(t).avg_pool2d(x, 3, 2, 1, count_include_pad=False), (1, 2, 6, 5))
_op("avg_pool2d_ceil", lambda t, x: F(t).avg_pool2d(x, (2, 3), (2, 2), (1, 1), ceil_mode=True), (1, 1, 6, 7))
_op("avg_pool2d_ceil_no_pad_count", lambda t, x: F(t).avg_pool2d(x, 3, 2, 1, True, False), (1, 1, 6, 6))
_op("avg_pool2d_divisor", lambda t, x: F(t).avg_pool2d(x, 2, divisor_override=3), (1, 2, 4, 4))
_op("avg_pool2d_unbatched", lambda t, x: F(t).avg_pool2d(x, 2, 1), (2, 4, 4))
_op("adaptive_avg_pool2d", lambda t, x: F(t).adaptive_avg_pool2d(x, (2, 3)), (2, 2, 5, 7))
_op("adaptive_avg_pool2d_int", lambda t, x: F(t).adaptive_avg_pool2d(x, 3), (1, 2, 7, 5))
_op("adaptive_avg_pool2d_none", lambda t, x: F(t).adaptive_avg_pool2d(x, (None, 2)), (1, 2, 3, 5))
_op("adaptive_avg_pool2d_larger", lambda t, x: F(t).adaptive_avg_pool2d(x, (4, 3)), (1, 1, 3, 2))
_op("adaptive_avg_pool2d_one", lambda t, x: F(t).adaptive_avg_pool2d(x, 1), (2, 3, 4, 4))
_op("adaptive_avg_pool2d_one_unbatched", lambda t, x: F(t).adaptive_avg_pool2d(x, (1, 1)), (3, 4, 4))
_op("adaptive_avg_pool2d_unbatched", lambda t, x: F(t).adaptive_avg_pool2d(x, 2), (3, 4, 5))


@program("layers_max_pool2d_ties")
def _max_pool_ties(t, p):
    """Equal maxima in a window: the first in scan order takes the grad, as torch's kernel keeps it."""
    x = p.leaf("x", [[[[1.0, 1.0, 0.0, 2.0], [1.0, 0.5, 2.0, 2.0], [-1.0, -1.0, 3.0, 0.0], [-1.0, -1.0, 0.0, 3.0]]]])
    y, idx = F(t).max_pool2d(x, 2, 1, return_indices=True)
    p.watch(y)
    p.value("indices", idx)
    p.run("backward", lambda: (y * p.const([[[[1.0, 2.0, 3.0]] * 3]])).sum().backward())
    p.value("grad", x.grad)


@program("layers_pool_modules")
def _pool_modules(t, p):
    nn = t.nn
    x = p.leaf("x", data(2, 2, 6, 6))
    mods = [nn.MaxPool2d(2), nn.MaxPool2d(3, stride=1, padding=1, dilation=1, ceil_mode=True),
            nn.MaxPool2d((2, 2), return_indices=True), nn.AvgPool2d(2), nn.AvgPool2d(3, 2, 1, True, False, 2),
            nn.AdaptiveAvgPool2d((2, 3)), nn.AdaptiveAvgPool2d(1), nn.AdaptiveAvgPool2d((None, 2))]
    outs = []
    for m in mods:
        y = m(x)
        if isinstance(y, tuple):
            p.value("indices", y[1])
            y = y[0]
        outs.append(y)
        p.value("repr", repr(m))
    p.watch(*outs)
    p.counter("forward")
    p.value("outs", tuple(outs))
    total = outs[0].sum()
    for i, y in enumerate(outs[1:]):
        total = total + y.sum() * (i + 2)
    p.run("backward", lambda: total.backward())
    p.value("grad", x.grad)


def _pool_errors(t, p):
    x = p.leaf("x", data(1, 2, 4, 4))
    return {
        "max pad": lambda: F(t).max_pool2d(x, 2, padding=2),
        "max too small": lambda: F(t).max_pool2d(x, 5),
        "max 2d": lambda: F(t).max_pool2d(x[0, 0], 2),
        "max zero kernel": lambda: F(t).max_pool2d(x, 0),
        "max zero stride": lambda: F(t).max_pool2d(x, 2, 0),
        "max zero dilation": lambda: F(t).max_pool2d(x, 2, dilation=0),
        "avg pad": lambda: F(t).avg_pool2d(x, 2, padding=2),
        "avg too small": lambda: F(t).avg_pool2d(x, 5),
        "avg 5d": lambda: F(t).avg_pool2d(x.unsqueeze(0), 2),
        "avg zero divisor": lambda: F(t).avg_pool2d(x, 2, divisor_override=0),
        "adaptive 2d": lambda: F(t).adaptive_avg_pool2d(x[0, 0], 2),
        "adaptive 3 sizes": lambda: F(t).adaptive_avg_pool2d(x, (1, 2, 3)),
        "max long": lambda: F(t).max_pool2d(t.ones(1, 1, 2, 2, dtype=t.int64), 2),
        "avg long": lambda: F(t).avg_pool2d(t.ones(1, 1, 2, 2, dtype=t.int64), 2),
    }


_errors("pool", _pool_errors)


def _cnn(t, p, dtype):
    """A small CNN classifier: conv, relu, max-pool, conv, adaptive pool, linear, loss. In float32 the values are
    compared by dtype and shape only (numpy's and torch's float32 sums round differently)."""
    nn = t.nn
    dt = getattr(t, dtype)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, dtype=dt), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, groups=2, dtype=dt), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3, dtype=dt))
    _load(t, p, model, "cnn", **{"0.weight": data(4, 1, 3, 3), "0.bias": data(4, seed=1),
                                 "3.weight": data(4, 2, 3, 3, seed=2), "3.bias": data(4, seed=3),
                                 "7.weight": data(3, 4, seed=4), "7.bias": data(3, seed=5)})
    x = p.leaf("x", data(2, 1, 6, 6, seed=6), dtype=dtype)
    loss = nn.CrossEntropyLoss()(model(x), t.tensor([2, 0]))
    p.watch(loss)
    p.counter("forward")
    p.run("backward", lambda: loss.backward())
    grads = tuple(q.grad for q in model.parameters()) + (x.grad,)
    if dtype == "float64":
        p.value("loss", loss)
        p.value("grads", grads)
    else:
        p.value("dtypes", tuple((str(g.dtype), tuple(g.shape)) for g in grads + (loss,)))


for _dt in ("float32", "float64"):
    PROGRAMS[f"layers_cnn_classifier_{_dt}"] = lambda t, p, _dt=_dt: _cnn(t, p, _dt)


# -- batch norm -----------------------------------------------------------------------------------------------
_op("batch_norm_train", lambda t, x, w, b: F(t).batch_norm(x, None, None, w, b, training=True), (3, 2, 2, 3), (2,),
    (2,))
_op("batch_norm_train_no_affine", lambda t, x: F(t).batch_norm(x, None, None, training=True, eps=0.1), (4, 3))
_op("batch_norm_eval", lambda t, x, w, b: F(t).batch_norm(x, t.tensor([0.1, -0.2], dtype=t.float64),
                                                         t.tensor([1.5, 0.5], dtype=t.float64), w, b), (3, 2, 2, 2),
    (2,), (2,))
_op("batch_norm_eval_input_only", lambda t, x, w, b: F(t).batch_norm(
    x, t.tensor([0.1, -0.2], dtype=t.float64), t.tensor([1.5, 0.5], dtype=t.float64), w, b), (3, 2, 4), (2,), (2,),
    grad=(True, False, False))
_op("batch_norm_train_weight_only", lambda t, x, w, b: F(t).batch_norm(x, None, None, w, b, True), (3, 2, 4), (2,),
    (2,), grad=(False, True, False))


def _bn_module(t, p, cls, shape, **kw):
    nn = t.nn
    bn = getattr(nn, cls)(shape[1], dtype=t.float64, **kw)
    if bn.weight is not None:
        _load(t, p, bn, "bn", weight=data(shape[1], seed=1), bias=data(shape[1], seed=2))
    x = p.leaf("x", data(*shape, seed=3))
    p.value("repr", repr(bn))
    p.value("buffers", tuple((n, b) for n, b in bn.named_buffers()))
    for step in range(2):
        y = bn(x * (step + 1))
        p.watch(y, tag=f"graph {step}")
        p.value("y", y)
        p.value("buffers", tuple((n, b, b._version) for n, b in bn.named_buffers()))
        p.run("backward", lambda y=y: (y * y).sum().backward())
    p.value("grads", (x.grad,) + tuple(q.grad for q in bn.parameters()))
    bn.eval()
    y = bn(x)
    p.watch(y, tag="eval")
    p.value("eval y", y)
    p.value("buffers", tuple((n, b, b._version) for n, b in bn.named_buffers()))
    p.run("eval backward", lambda: y.sum().backward())
    p.value("grads", (x.grad,) + tuple(q.grad for q in bn.parameters()))
    p.value("state_dict", tuple(bn.state_dict()))


for _name, _cls, _shape, _kw in (
        ("2d", "BatchNorm2d", (3, 2, 2, 3), {}),
        ("2d_momentum_none", "BatchNorm2d", (2, 3, 2, 2), {"momentum": None}),
        ("2d_no_affine", "BatchNorm2d", (2, 2, 3, 2), {"affine": False, "eps": 1e-3}),
        ("2d_no_running_stats", "BatchNorm2d", (2, 2, 2, 2), {"track_running_stats": False}),
        ("1d", "BatchNorm1d", (4, 3), {"momentum": 0.3}),
        ("1d_3d_input", "BatchNorm1d", (2, 3, 4), {})):
    PROGRAMS[f"layers_batch_norm_module_{_name}"] = lambda t, p, c=_cls, s=_shape, k=_kw: _bn_module(t, p, c, s, **k)


def _bn_errors(t, p):
    x = p.leaf("x", data(1, 2, 3, 3))
    return {
        "one value per channel": lambda: F(t).batch_norm(p.leaf("x1", data(1, 2)), None, None, training=True),
        "2d module 3d input": lambda: t.nn.BatchNorm2d(2)(x[0]),
        "1d module 4d input": lambda: t.nn.BatchNorm1d(2)(x),
        "channels": lambda: F(t).batch_norm(x, t.zeros(3, dtype=t.float64), t.ones(3, dtype=t.float64)),
        "weight size": lambda: F(t).batch_norm(x, None, None, p.leaf("w", [1.0, 2.0, 3.0]), training=True),
        "eval without stats": lambda: F(t).batch_norm(x, None, None),
        "module train batch 1": lambda: t.nn.BatchNorm1d(2, dtype=t.float64)(p.leaf("x2", data(1, 2))),
    }


_errors("batch_norm", _bn_errors)


# -- recurrent cells ------------------------------------------------------------------------------------------
def _lstm_cell(t, p, batched: bool, state: bool, bias: bool):
    """LSTMCell over two steps: torch's CPU decomposition (linear, linear, add, unsafe_chunk, gates, cell)."""
    cell = t.nn.LSTMCell(3, 2, bias=bias, dtype=t.float64)
    weights = {"weight_ih": data(8, 3), "weight_hh": data(8, 2, seed=1)}
    if bias:
        weights.update(bias_ih=data(8, seed=2), bias_hh=data(8, seed=3))
    _load(t, p, cell, "cell", **weights)
    lead = (2,) if batched else ()
    xs = [p.leaf(f"x{i}", data(*lead, 3, seed=4 + i)) for i in range(2)]
    hx = (p.leaf("h0", data(*lead, 2, seed=6)), p.const(data(*lead, 2, seed=7))) if state else None
    for i, x in enumerate(xs):
        hx = cell(x, hx)
        p.watch(*hx, tag=f"step {i}")
    p.value("h, c", hx)
    p.value("repr", repr(cell))
    p.run("backward", lambda: (hx[0].sum() + (hx[1] * 2).sum()).backward())
    p.value("grads", tuple(xs) + tuple(x.grad for x in xs) + tuple(q.grad for q in cell.parameters()))


for _b in (True, False):
    for _s in (True, False):
        PROGRAMS[f"layers_lstm_cell_{'batched' if _b else 'unbatched'}_{'state' if _s else 'zeros'}"] = \
            lambda t, p, _b=_b, _s=_s: _lstm_cell(t, p, _b, _s, True)
PROGRAMS["layers_lstm_cell_no_bias"] = lambda t, p: _lstm_cell(t, p, True, True, False)


def _rnn_errors(t, p):
    cell = t.nn.LSTMCell(3, 2, dtype=t.float64)
    return {
        "3d input": lambda: cell(p.leaf("x3", data(1, 2, 3))),
        "input size": lambda: cell(p.leaf("x4", data(2, 4))),
        "hidden size": lambda: cell(p.leaf("x", data(2, 3)), (p.const(data(2, 3)), p.const(data(2, 2)))),
        "hidden batch": lambda: cell(p.leaf("x", data(2, 3)), (p.const(data(3, 2)), p.const(data(3, 2)))),
        "hidden 3d": lambda: cell(p.leaf("x", data(2, 3)), (p.const(data(1, 2, 2)), p.const(data(1, 2, 2)))),
    }


_errors("rnn", _rnn_errors)
