"""float16 and bfloat16 on engine and torch, run by test_dtypes_parity.py.

float16 tensors are numpy's half: each op rounds its result to half, as torch's CPU kernels do (softmax computes
in float and rounds once, as torch's). The programs compare values bit for bit where torch rounds once per op
(pointwise ops, casts, small sums and products) and the dtypes torch's promotion gives. bfloat16 is named (a
program may look it up in a table, as nanoGPT's train.py does), but the engine cannot hold it: its programs
compare the dtype object only.

Each is `fn(t, p)`; see parity.py.
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

H = [1.0, 2.5, 1e-4, 0.1, 3.14159, -0.7]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


@program("dtypes_half_pointwise")
def _pointwise(t, p):
    x = p.leaf("x", H, dtype="float16")
    y = ((x * 1.1 + 0.3) / 3).exp() - x.sin() * x
    p.watch(y)
    p.value("y", y)
    p.run("backward", lambda: y.sum().backward())
    p.value("x.grad", x.grad)
    p.value("big", (x * 60000.0, x + 65504.0, x / 1e5))


@program("dtypes_half_activations")
def _activations(t, p):
    """tanh and sigmoid in half: torch's backward kernels compute in float and round once."""
    x = p.leaf("x", [[-0.71, -0.3, -1.15], [1.22, -1.17, -0.4]], dtype="float64")
    h = x.half()
    y = t.tanh(h) * 2 + t.sigmoid(h)
    p.watch(y)
    p.value("y", y)
    p.run("backward", lambda: y.double().sum().backward())
    p.value("x.grad", x.grad)


@program("dtypes_half_casts")
def _casts(t, p):
    w = p.leaf("w", [0.1, 0.3, 70000.0, 1e-8, -2.0], dtype="float32")
    h = w.half()
    p.watch(h)
    p.value("h", h)
    p.value("to", (w.to(t.float16), w.to(dtype=t.half), t.tensor([0.1, 1 / 3], dtype=t.float16)))
    back = h.float()
    p.watch(back, tag="back")
    p.value("back", back)
    p.run("backward", lambda: (back * back).sum().backward())
    p.value("w.grad", w.grad)
    p.value("double", t.tensor([0.1], dtype=t.float64).half().double())
    p.value("ints", (t.tensor([3, 70000]).half(), t.tensor([1.7, -1.7], dtype=t.float16).long()))


@program("dtypes_half_promotion")
def _promotion(t, p):
    h = t.tensor([0.1, 0.2], dtype=t.float16)
    f = t.tensor([1.0, 2.0])
    cases = {
        "half + float": lambda: h + f,
        "half + python float": lambda: h + 1.5,
        "half + python int": lambda: h * 3,
        "half + 0-dim float": lambda: h + t.tensor(1.5),
        "half + 0-dim double": lambda: h * t.tensor(2.0, dtype=t.float64),
        "half + long": lambda: h + t.tensor([1, 2]),
        "long + 0-dim half": lambda: t.tensor([1, 2]) + t.tensor(0.5, dtype=t.float16),
        "half + bool": lambda: h + t.tensor([True, False]),
        "0-dim half + float": lambda: t.tensor(0.5, dtype=t.float16) + f,
        "where": lambda: t.where(t.tensor([True, False]), h, f),
        "cat": lambda: t.cat([h, f]),
    }
    for tag, case in cases.items():
        out = p.run(tag, case)
        if out is not None:
            p.value(tag, (str(out.dtype), out))


@program("dtypes_half_reductions_and_layers")
def _layers(t, p):
    x = p.leaf("x", [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]], dtype="float16")
    w = p.leaf("w", [[0.5, -0.25, 1.0], [0.125, 0.75, -1.5]], dtype="float16")
    ys = (x.sum(), x.mean(0), x.softmax(-1), x.log_softmax(0), x @ w.t(), t.nn.functional.relu(x), x.max(1).values)
    for i, y in enumerate(ys):
        p.watch(y, tag=f"graph {i}")
        p.value(f"y{i}", y)
    total = sum(y.float().sum() for y in ys)
    p.run("backward", lambda: total.backward())
    p.value("grads", (x.grad, w.grad))


@program("dtypes_half_module")
def _module(t, p):
    nn = t.nn
    lin = nn.Linear(3, 2)
    with t.no_grad():
        lin.weight.copy_(t.tensor([[0.5, -0.25, 1.0], [0.125, 0.75, -1.5]]))
        lin.bias.copy_(t.tensor([0.1, -0.2]))
    lin.half()
    p.value("dtypes", tuple(str(q.dtype) for q in lin.parameters()))
    x = p.leaf("x", [[0.5, -1.25, 2.0]], dtype="float16")
    y = lin(x)
    p.watch(y)
    p.value("y", y)
    p.run("backward", lambda: y.sum().backward())
    p.value("grads", (lin.weight.grad, lin.bias.grad, x.grad))
    lin.float()
    p.value("float again", tuple(str(q.dtype) for q in lin.parameters()))


@program("dtypes_half_random")
def _random(t, p):
    """rand, randn and their _like forms make half tensors; a uniform half sample is in [0, 1): 2**16 float
    samples would hold some that round up to 1 in half."""
    n = 2 ** 16
    h = t.ones(n, dtype=t.float16)
    makers = {"rand": lambda: t.rand(n, dtype=t.float16), "randn": lambda: t.randn(n, dtype=t.float16),
              "rand_like": lambda: t.rand_like(h), "randn_like": lambda: t.randn_like(h)}
    for tag, make in makers.items():
        out = p.run(tag, make)
        if out is None:
            continue
        p.value(tag, (str(out.dtype), tuple(out.shape)))
        if tag in ("rand", "rand_like"):
            p.value(f"{tag} in [0, 1)", bool(((out >= 0) & (out < 1)).all()))


@program("dtypes_bfloat16_named")
def _bfloat16(t, p):
    table = {"float32": t.float32, "bfloat16": t.bfloat16, "float16": t.float16}
    p.value("names", tuple(str(d) for d in table.values()))
    p.value("properties", (t.bfloat16.is_floating_point, t.bfloat16.itemsize, t.float16.itemsize,
                           t.half is t.float16, t.bfloat16 == t.float16, t.bfloat16 == table["bfloat16"]))
    p.value("hashable", len({t.bfloat16, t.float16, t.float32}))
