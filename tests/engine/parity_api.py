"""The small APIs real programs reach before their first backward (devices, legacy constructors, `.data`
assignment, numpy, formatting, keyword aliases, range indexing), run on engine and torch by test_api_parity.py.
Each is `fn(t, p)`; see parity.py.
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


@program("a CPU-only torch: cuda, accelerator, backends, mps")
def _devices(t, p):
    p.value("cuda", (t.cuda.is_available(), t.cuda.device_count(), t.cuda.is_initialized()))
    p.value("device choice", str(t.device("cuda" if t.cuda.is_available() else "cpu")))
    p.value("cuda seeds", (t.cuda.manual_seed(0), t.cuda.manual_seed_all(0), t.cuda.empty_cache()))
    p.value("memory", t.cuda.memory_allocated())
    p.run("current_device", lambda: t.cuda.current_device())
    p.run("get_device_name", lambda: t.cuda.get_device_name())
    p.run("synchronize", lambda: t.cuda.synchronize())
    p.value("accelerator", (t.accelerator.is_available(), t.accelerator.device_count(),
                            t.accelerator.current_accelerator()))
    p.run("accelerator index", lambda: t.accelerator.current_device_index())
    p.value("mps", (t.backends.mps.is_available(), t.backends.mps.is_built()))
    p.value("cudnn", (t.backends.cudnn.is_available(), t.backends.cudnn.enabled, t.backends.cudnn.deterministic,
                      t.backends.cudnn.benchmark))
    p.value("tf32", (t.backends.cuda.matmul.allow_tf32, t.backends.cudnn.allow_tf32))
    t.backends.cudnn.deterministic = True
    t.backends.cudnn.deterministic = False
    p.value("mps seed", t.mps.manual_seed(0) if hasattr(t, "mps") else None)


@program("nelement, numel and legacy constructors")
def _legacy(t, p):
    x = p.leaf("x", A23)
    p.value("nelement", (x.nelement(), x.numel(), t.ones(0).nelement()))
    p.value("Tensor(list)", t.Tensor([0]))
    p.value("Tensor(ints)", t.Tensor([[1, 2], [3, 4]]))
    p.value("Tensor(bools)", t.Tensor([True, False]).dtype)
    p.value("Tensor(sizes)", (tuple(t.Tensor(2, 3).shape), t.Tensor(2, 3).dtype, tuple(t.Tensor().shape)))
    p.value("LongTensor", (t.LongTensor([1, 2]), t.LongTensor([[1, 2]]).dtype, tuple(t.LongTensor(3).shape)))
    p.value("FloatTensor", (t.FloatTensor([1, 2]), tuple(t.FloatTensor(2, 2).shape), t.DoubleTensor([1]).dtype))
    p.value("BoolTensor", t.BoolTensor([True, False]))
    p.value("isinstance", (isinstance(t.ones(2), t.FloatTensor), isinstance(t.ones(2), t.LongTensor),
                           isinstance(t.ones(2, dtype=t.long), t.LongTensor), isinstance(t.ones(2), t.Tensor)))
    p.value("type", type(t.LongTensor([1])).__name__)
    p.counter("end")


@program("from_numpy shares memory, as_tensor keeps numpy's dtype")
def _numpy(t, p):
    import numpy as np

    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = t.from_numpy(a)
    a[0, 0] = 9.0
    p.value("shared", (x, x.dtype))
    p.value("float32", t.from_numpy(np.ones(2, dtype=np.float32)).dtype)
    p.value("int64", t.from_numpy(np.arange(3)))
    p.run("list", lambda: t.from_numpy([1.0]))
    p.value("as_tensor", (t.as_tensor(np.float64(1.5)).dtype, t.as_tensor([1, 2]).dtype, t.as_tensor([1.0]).dtype,
                          t.as_tensor(a).dtype, t.as_tensor([np.float64(1.0), np.float64(2.0)]).dtype))
    y = t.ones(2)
    p.value("as_tensor tensor", (t.as_tensor(y) is y, t.as_tensor(y, dtype=t.float64).dtype))
    w = p.leaf("w", [1.0, 2.0])
    z = w * t.from_numpy(np.array([3.0, 4.0]))
    p.watch(z)
    z.sum().backward()
    p.value("w.grad", w.grad)


@program("format specs on tensors")
def _format(t, p):
    p.value("float", "{:.4f}".format(t.tensor(1.5)))
    p.value("int", f"{t.tensor(3):d} {t.tensor(7):>4}")
    p.value("empty spec", "{}".format(t.tensor(2.5)))
    p.value("loss", f"loss {(p.leaf('l', 0.123456) * 2):.3f}")
    p.run("1-d with a spec", lambda: "{:.4f}".format(t.tensor([1.5])))
    p.value("1-d without", f"{t.tensor([1.5, 2.0])}")


@program("p.data += and p.data = make no node and keep the parameter's version")
def _data_assign(t, p):
    w = t.nn.Parameter(t.tensor([1.0, 2.0]))
    p.labels[id(w)] = "w"
    (w * 3).sum().backward()
    p.counter("after backward")
    w.data += 1
    p.made("+=", w)
    w.data -= 0.5 * w.grad
    p.made("-=", w)
    w.data *= 2
    w.data = w.data.clamp(0, 4)
    p.made("= clamp", w)
    p.counter("after updates")
    y = t.zeros(2)
    w.data = y
    y.add_(5)
    p.made("shares y's memory, not its counter", w, y)
    w.data.mul_(2)
    p.made("its .data has its own counter", w, y)
    w.data = t.zeros(3, dtype=t.float64)
    p.made("shape and dtype", w)
    p.run("not a tensor", lambda: setattr(w, "data", [1.0]))
    x = p.leaf("x", [1.0, 2.0])
    z = x * 2
    z.data = t.zeros(2)
    p.made("non-leaf keeps grad_fn", z)
    z.sum().backward()
    p.value("x.grad", x.grad)
    v = t.nn.Parameter(t.ones(2))
    loss = (v * v).sum()
    v.data.add_(1)
    p.run("backward after a .data write", lambda: loss.backward())
    p.value("v.grad", v.grad)
    p.counter("end")


@program("keepdims= and axis= aliases on reductions")
def _aliases(t, p):
    x = p.leaf("x", A23)
    outs = [x.sum(1, keepdims=True), x.sum(axis=0), t.sum(x, axis=1, keepdims=True), x.mean(axis=1),
            x.mean(1, keepdims=True), t.mean(x, axis=0), x.std(axis=1), x.var(1, keepdims=True),
            x.max(axis=1).values, x.argmax(axis=1), x.logsumexp(axis=1), x.softmax(1).sum(axis=0),
            t.cat([x, x], axis=1).sum(axis=1)]
    for i, o in enumerate(outs):
        p.value(f"out {i}", o)
    p.watch(*outs)
    sum(o.sum() for o in outs).backward()
    p.value("x.grad", x.grad)
    p.run("both dim and axis", lambda: x.sum(1, axis=1))


@program("indexing and assigning with a range")
def _range_index(t, p):
    x = p.leaf("x", [[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, -2.2], [0.0, 0.9, -0.4, 1.3]])
    a = x[range(2), t.tensor([0, 3])]
    b = x[range(0, 3, 2), 1:3]
    c = x[:, range(1, 3)]
    d = x[range(2)]
    e = x[range(0)]
    p.watch(a, b, c, d, e)
    (a.sum() + b.sum() + c.sum() + d.sum() + e.sum()).backward()
    p.value("x.grad", x.grad)
    y = p.const([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    y[range(2), t.tensor([0, 1])] = 5.0
    y[range(1)] = 7.0
    p.value("y", y)
    h = x * 1
    h[range(2), [1, 2]] = t.tensor([9.0, 8.0], dtype=t.float64)
    p.watch(h)
    h.sum().backward()
    p.value("x.grad 2", x.grad)


@program("int32 tensors: factories, promotion, indexing, reductions")
def _int32(t, p):
    import numpy as np

    a = t.tensor([1, 2, 3], dtype=t.int32)
    p.value("dtype", (str(a.dtype), str(t.int), a.dtype.itemsize, a.dtype.is_floating_point))
    p.value("arith", (a + 1, a * 2, a + t.tensor([1, 1, 1]), a * 1.5, a / 2, a + t.tensor(2), -a))
    p.value("cast", (a.long(), a.float(), t.ones(2).int(), t.ones(2).to(t.int32), t.arange(3, dtype=t.int32)))
    p.value("reduce", (a.sum(), a.max(), a.argmax()))
    x = p.leaf("x", [0.5, -1.0, 2.0])
    y = x[a - 1] * 2
    p.watch(y)
    y.sum().backward()
    p.value("x.grad", x.grad)
    p.value("numpy", (t.from_numpy(np.array([1, 2], dtype=np.int32)), t.IntTensor([1, 2])))
    p.value("isinstance", (isinstance(a, t.IntTensor), isinstance(a, t.LongTensor)))
    p.run("requires_grad", lambda: t.tensor([1], dtype=t.int32, requires_grad=True))


def _amax_program(name: str, build: Callable, data) -> None:
    def fn(t, p):
        from tests.engine.parity_programs import _forward_and_grads

        x = p.leaf("x", data)
        _forward_and_grads(t, p, lambda x: build(t, x), x)
        out = build(t, x)
        p.value("saved", (out.grad_fn._saved_dim, out.grad_fn._saved_keepdim, out.grad_fn._saved_self is x,
                          out.grad_fn._saved_result.equal(out)))
    PROGRAMS[f"amax/amin {name}"] = fn


TIES = [[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]]
_amax_program("dim 1", lambda t, x: x.amax(1), TIES)
_amax_program("dim -1 keepdim", lambda t, x: x.amax(-1, keepdim=True), TIES)
_amax_program("all dims", lambda t, x: x.amax(), TIES)
_amax_program("dims (0, 1)", lambda t, x: t.amax(x, (0, 1)), TIES)
_amax_program("axis alias", lambda t, x: x.amax(axis=0, keepdims=True), TIES)
_amax_program("amin dim 0", lambda t, x: x.amin(0), TIES)
_amax_program("amin all, torch.amin", lambda t, x: t.amin(x), TIES)
_amax_program("0-dim", lambda t, x: x.amax(), 2.5)
_amax_program("3-d dims (0, 2)", lambda t, x: x.amin(dim=(2, 0)),
              [[[1.0, 1.0], [0.5, 2.0]], [[1.0, -1.0], [0.5, 0.5]]])


@program("amax/amin errors and integer inputs")
def _amax_errors(t, p):
    x = p.leaf("x", [[0.5, 1.0]])
    p.run("empty dim", lambda: t.zeros(2, 0, requires_grad=True).amax(1))
    p.run("empty all", lambda: t.zeros(2, 0, requires_grad=True).amin())
    p.value("empty other dim", t.zeros(2, 0).amax(0))
    p.value("ints", (t.tensor([1, 5]).amax(), t.tensor([True, False]).amin(), t.tensor([[1, 5], [7, 0]]).amax(0)))
    p.run("dim out of range", lambda: x.amax(2))
    p.counter("end")


@program("numpy names only where torch's argument parser reads them")
def _numpy_names_refused(t, p):
    x = p.leaf("x", A23)
    p.run("Tensor.norm keepdims", lambda: x.norm(dim=1, keepdims=True))
    p.run("torch.norm axis", lambda: t.norm(x, axis=1))
    p.run("split axis", lambda: x.split(1, axis=1))
    p.run("F.softmax axis", lambda: t.nn.functional.softmax(x, axis=1))
    p.value("softmax method axis", x.softmax(axis=1))
    p.value("vector_norm axis", t.linalg.vector_norm(x, axis=1, keepdims=True))
    p.counter("end")


@program("writes into zero-size tensors (Linear(0, n) loading its state)")
def _zero_size_writes(t, p):
    m = t.nn.Linear(0, 3, dtype=t.float64)
    p.run("load_state_dict", lambda: m.load_state_dict({"weight": p.const([[], [], []]),
                                                       "bias": p.const([-1.96, 0.35, 1.87])}))
    p.value("params", (m.weight, m.bias))
    z = t.zeros(3, 0, dtype=t.float64)
    p.value("copy_ fill_ add_", (z.copy_(t.ones(3, 0, dtype=t.float64)), z.fill_(2.0), z.add_(1.0), z._version))
    p.counter("end")


@program("GradScaler on a CPU-only machine: disabled, so scale/unscale_/step/update are the plain training step")
def _grad_scaler(t, p):
    w = p.leaf("w", [1.0, -2.0])
    opt = t.optim.SGD([w], lr=0.5)
    for tag, make in (("cuda.amp", lambda: t.cuda.amp.GradScaler(enabled=True)),
                      ("amp default", lambda: t.amp.GradScaler()), ("amp cuda", lambda: t.amp.GradScaler("cuda"))):
        scaler = make()
        p.value(tag, (scaler.is_enabled(), scaler.get_scale(), scaler.state_dict()))
        p.run(tag + " growth factor", scaler.get_growth_factor)
        loss = (w * w).sum()
        scaled = scaler.scale(loss)
        p.value(tag + " scaled is loss", scaled is loss)
        p.watch(scaled, tag=tag + " graph")
        scaled.backward()
        p.value(tag + " unscale_", scaler.unscale_(opt))
        p.value(tag + " step", scaler.step(opt))
        p.value(tag + " update", scaler.update())
        p.value(tag + " w", (w, w.grad, w._version))
        opt.zero_grad()
    p.counter("end")


@program("autograd.Variable: a detached alias of a tensor, of its dtype; requires_grad= makes a leaf")
def _variable(t, p):
    from_long = t.autograd.Variable(t.tensor([1, 2]))
    p.value("long", (from_long, type(from_long).__name__, from_long.is_leaf))
    w = t.autograd.Variable(t.ones(2, dtype=t.float64), requires_grad=True)
    p.labels[id(w)] = "w"
    p.value("leaf", (w.requires_grad, w.is_leaf, type(w).__name__))
    y = (w * 3).sum()
    z = t.autograd.Variable(y)
    p.value("from a non-leaf", (z.grad_fn, z.requires_grad, z.is_leaf))
    p.value("isinstance", (isinstance(t.ones(1), t.autograd.Variable), isinstance(1.0, t.autograd.Variable)))
    p.run("a list", lambda: t.autograd.Variable([1.0]))
    p.watch(y)
    y.backward()
    p.value("w.grad", w.grad)
    p.counter("end")
