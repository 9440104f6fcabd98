"""Programs run on both engine and torch by test_torch_parity.py. Each is `fn(t, p)`; see parity.py.

Data is written out (no random factories), so both modules see the same numbers.
"""
from __future__ import annotations

import random
from typing import Any, Callable

PROGRAMS: dict[str, Callable] = {}

A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
B23 = [[1.1, 0.4, -0.9], [0.2, -1.3, 0.8]]
POS23 = [[0.5, 1.2, 2.0], [1.5, 0.3, 0.7]]
V3 = [0.3, -0.8, 1.4]
W43 = [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 0.2]]
B4 = [0.05, -0.15, 0.25, 0.35]


def program(name: str):
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _forward_and_grads(t, p, build, *leaves, create_graph: bool = True):
    """Watch the forward graph, run grad with a weighted output, watch the formula graph, take 2nd order."""
    out = build(*leaves)
    p.watch(out)
    p.counter("forward")
    v = p.leaf("v", _ones_like_list(out), dtype="float64")
    grads = p.run("grad", lambda: t.autograd.grad(out, leaves, v, create_graph=create_graph, allow_unused=True))
    p.counter("after grad")
    if grads is None:
        return
    p.value("grads", grads)
    live = [g for g in grads if g is not None and g.requires_grad]
    if live:
        p.watch(*live, hooks=False, tag="formula graph")
        total = live[0].sum()
        for g in live[1:]:
            total = total + g.sum()
        second = p.run("second", lambda: t.autograd.grad(total, list(leaves) + [v], allow_unused=True))
        p.value("second", second)
        p.counter("after second")


def _ones_like_list(x) -> Any:
    shape = tuple(x.shape)
    if not shape:
        return 0.7
    def build(dims, base):
        if len(dims) == 1:
            return [0.7 + 0.1 * ((base + i) % 5) for i in range(dims[0])]
        return [build(dims[1:], base + i * 3) for i in range(dims[0])]
    return build(list(shape), 0)


# -- every op: forward graph, formula graph under create_graph, second order ------------------------------
def _op(name: str, build: Callable, *data: Any, needs_grad: tuple = ()) -> None:
    def fn(t, p):
        leaves = [p.leaf(f"x{i}", d, requires_grad=(not needs_grad or needs_grad[i])) for i, d in enumerate(data)]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *[x for x in leaves if x.requires_grad])
    PROGRAMS[f"op_{name}"] = fn


def _op_all(name, build, *data):
    def fn(t, p):
        leaves = [p.leaf(f"x{i}", d) for i, d in enumerate(data)]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *leaves)
    PROGRAMS[f"op_{name}"] = fn


_op_all("add", lambda t, a, b: a + b, A23, B23)
_op_all("add_broadcast", lambda t, a, b: a + b, A23, V3)
_op_all("add_scalar", lambda t, a: a + 2, A23)
_op_all("radd_scalar", lambda t, a: 2 + a, A23)
_op_all("sub", lambda t, a, b: a - b, A23, B23)
_op_all("sub_broadcast", lambda t, a, b: b - a, [[1.0], [2.0]], A23)
_op_all("sub_scalar", lambda t, a: a - 2, A23)
_op_all("rsub_scalar", lambda t, a: 2 - a, A23)
_op_all("mul", lambda t, a, b: a * b, A23, B23)
_op_all("mul_broadcast", lambda t, a, b: a * b, [[1.0], [2.0]], V3)
_op_all("mul_scalar", lambda t, a: a * 2, A23)
_op_all("rmul_scalar", lambda t, a: 2 * a, A23)
_op_all("div", lambda t, a, b: a / b, A23, POS23)
_op_all("div_scalar", lambda t, a: a / 2, A23)
_op_all("rdiv_scalar", lambda t, a: 2 / a, POS23)
_op_all("neg", lambda t, a: -a, A23)
_op_all("pow2", lambda t, a: a ** 2, A23)
_op_all("pow3_method", lambda t, a: a.pow(3), A23)
_op_all("pow_half", lambda t, a: a ** 0.5, POS23)
_op_all("pow_zero", lambda t, a: a ** 0, POS23)
_op_all("pow_tensor", lambda t, a, b: a ** b, POS23, B23)
_op_all("rpow", lambda t, a: 2 ** a, A23)
for _name in ("exp", "sin", "cos", "tanh", "sigmoid", "relu", "abs"):
    _op_all(_name, lambda t, a, _n=_name: getattr(a, _n)(), A23)
_op_all("log", lambda t, a: a.log(), POS23)
_op_all("sqrt", lambda t, a: a.sqrt(), POS23)
_op_all("module_exp", lambda t, a: t.exp(a) + t.sigmoid(a) + t.tanh(a) + t.relu(a), A23)
_op_all("sum", lambda t, a: a.sum(), A23)
_op_all("sum_dim", lambda t, a: a.sum(1), A23)
_op_all("sum_dim_keepdim", lambda t, a: a.sum(dim=0, keepdim=True), A23)
_op_all("sum_dims", lambda t, a: a.sum((0, 1)), A23)
_op_all("mean", lambda t, a: a.mean(), A23)
_op_all("mean_dim", lambda t, a: a.mean(1), A23)
_op_all("mean_dim_keepdim", lambda t, a: a.mean(-1, keepdim=True), A23)
_op_all("mean_1d", lambda t, a: a.mean(), V3)
_op_all("mm", lambda t, a, b: a @ b, A23, [[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]])
_op_all("mm_fn", lambda t, a, b: t.mm(a, b), A23, [[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]])
_op_all("mm_transposed", lambda t, a, b: a.t() @ b, A23, B23)
_op_all("mm_both_transposed", lambda t, a, b: a.t() @ b.t(), A23, [[1.0, 2.0], [3.0, -4.0], [0.5, 6.0], [7.0, 0.8]])
_op_all("dot", lambda t, a, b: a @ b, V3, [1.0, 2.0, -0.5])
_op_all("mv", lambda t, a, b: a @ b, A23, V3)
_op_all("vm", lambda t, a, b: a @ b, [0.5, -1.0], A23)
_op_all("matmul_3d", lambda t, a, b: t.matmul(a, b), [A23, B23], [[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]])
_op_all("t", lambda t, a: a.t(), A23)
_op_all("T", lambda t, a: a.T, A23)
_op_all("transpose", lambda t, a: a.transpose(0, 1), A23)
_op_all("view", lambda t, a: a.view(6), A23)
_op_all("view_infer", lambda t, a: a.view(3, -1), A23)
_op_all("reshape", lambda t, a: a.reshape(3, 2), A23)
_op_all("reshape_noncontiguous", lambda t, a: a.t().reshape(6), A23)
_op_all("unsqueeze", lambda t, a: a.unsqueeze(0), A23)
_op_all("unsqueeze_neg", lambda t, a: a.unsqueeze(-1), A23)
_op_all("squeeze_dim", lambda t, a: a.squeeze(0), [V3])
_op_all("squeeze_noop", lambda t, a: a.squeeze(0), A23)
_op_all("squeeze_all", lambda t, a: a.squeeze(), [[V3]])
_op_all("expand", lambda t, a: a.expand(4, 3), [V3])
_op_all("expand_new_dims", lambda t, a: a.expand(2, 3), V3)
_op_all("select", lambda t, a: a[0], A23)
_op_all("select_neg", lambda t, a: a[-1], A23)
_op_all("select_dim1", lambda t, a: a[:, 1], A23)
_op_all("slice", lambda t, a: a[0:1], A23)
_op_all("slice_dim1", lambda t, a: a[:, 1:3], A23)
_op_all("slice_step", lambda t, a: a[0:3:2], [V3, V3, V3, V3])
_op_all("index_chain", lambda t, a: a[0, 1:3], A23)
_op_all("index_none", lambda t, a: a[None], A23)
_op_all("index_none_mid", lambda t, a: a[:, None, 1], A23)
_op_all("cat", lambda t, a, b: t.cat([a, b]), A23, [V3])
_op_all("cat_dim1", lambda t, a, b: t.cat([a, b], 1), A23, B23)
_op_all("stack", lambda t, a, b: t.stack([a, b]), A23, B23)
_op_all("stack_dim1", lambda t, a, b: t.stack([a, b], 1), A23, B23)
_op_all("clone", lambda t, a: a.clone(), A23)
_op_all("max", lambda t, a: a.max(), A23)
_op_all("maximum", lambda t, a, b: t.maximum(a, b), A23, B23)
_op_all("where", lambda t, a, b: t.where(a > 0, a, b), A23, B23)
_op_all("where_scalar", lambda t, a: t.where(a > 0, a, 0.0), A23)
_op_all("softmax", lambda t, a: a.softmax(-1), A23)
_op_all("softmax_F", lambda t, a: t.nn.functional.softmax(a, dim=0), A23)
_op_all("log_softmax", lambda t, a: a.log_softmax(1), A23)
_op_all("mse_loss", lambda t, a, b: t.nn.functional.mse_loss(a, b), A23, B23)
_op_all("mse_loss_sum", lambda t, a, b: t.nn.functional.mse_loss(a, b, reduction="sum"), A23, B23)
_op_all("mse_loss_none", lambda t, a, b: t.nn.functional.mse_loss(a, b, reduction="none"), A23, B23)
_op_all("linear", lambda t, x, w, b: t.nn.functional.linear(x, w, b), A23, W43, B4)
_op_all("linear_nobias", lambda t, x, w: t.nn.functional.linear(x, w), A23, W43)
_op_all("linear_1d", lambda t, x, w, b: t.nn.functional.linear(x, w, b), V3, W43, B4)
_op_all("linear_3d", lambda t, x, w, b: t.nn.functional.linear(x, w, b), [A23, B23], W43, B4)
_op_all("to_double", lambda t, a: a.to(t.float64) * 2, A23)
_op_all("chain_mix", lambda t, a, b: ((a * b).exp() + a.sin() * 3 - b / 2).sum(1).mean(), A23, B23)
_op("mul_half_requires", lambda t, a, b: a * b, A23, B23, needs_grad=(True, False))


@program("float32_ops")
def _float32(t, p):
    x = p.leaf("x", A23, dtype="float32")
    y = (x * 2.5 + 1).exp().sum()
    p.watch(y)
    p.run("backward", y.backward)
    p.value("x.grad", x.grad)


# -- engine-semantics §15 worked examples and the engine's ordering -------------------------------------
@program("diamond")
def _diamond(t, p):
    x = p.leaf("x", [1.0, 2.0])
    y = x.exp()
    z = (y.sin() + y.cos()).sum()
    p.watch(z)
    p.run("backward", z.backward)
    p.value("x.grad", x.grad)


@program("acc_ties_8")
def _ties(t, p):
    leaves = [p.leaf(c, [1.0, 2.0]) for c in "abcdefgh"]
    z = t.cat(leaves).sum()
    p.watch(z)
    p.run("backward", z.backward)


@program("acc_preempts")
def _preempt(t, p):
    leaves = [p.leaf(c, [1.0, 2.0]) for c in "pqrst"]
    w = p.leaf("w", [0.5] * 10)
    z = (t.cat(leaves) * w).sum()
    p.watch(z)
    p.run("backward", z.backward)


@program("forced_ties")
def _forced(t, p):
    leaves = [p.leaf(c, [1.0, 2.0]) for c in "pqrst"]
    parts = [x.exp() for x in leaves]
    for part in parts:
        part.grad_fn._set_sequence_nr(p.base + 1000)  # relative: the counters start elsewhere
    z = t.cat(parts).sum()
    p.watch(z)
    p.run("backward", z.backward)


@program("inputs_prunes")
def _inputs_prunes(t, p):
    a = p.leaf("a", [1.0, 2.0])
    b = p.leaf("b", [0.5, 0.25])
    y = (a * 2 + b.exp()).sum()
    p.watch(y)
    p.run("backward", lambda: y.backward(inputs=[a]))
    p.value("grads", (a.grad, b.grad))


@program("grad_middle")
def _grad_middle(t, p):
    x = p.leaf("x", [1.0, 2.0])
    k = x.exp() * 3
    y = k.sin().sum()
    p.watch(y)
    p.value("grad", p.run("grad", lambda: t.autograd.grad(y, [k])))


@program("backward_inputs_nonleaf")
def _inputs_nonleaf(t, p):
    x = p.leaf("x", [1.0, 2.0])
    k = x.exp() * 3
    y = k.sin().sum()
    p.watch(y)
    p.run("backward", lambda: y.backward(inputs=[k]))
    p.value("k", (k.grad, k.retains_grad, x.grad))


@program("two_roots")
def _two_roots(t, p):
    x = p.leaf("x", [1.0, 2.0])
    r1, r2 = (x * 2).sum(), x.exp().sum()
    p.watch(r1, r2)
    p.run("backward", lambda: t.autograd.backward([r1, r2]))
    p.counter("after")
    p.value("x.grad", x.grad)


@program("grad_several_inputs_above_each_other")
def _grad_stacked(t, p):
    x = p.leaf("x", [1.0, 2.0])
    h = x * 2
    k = h * 5
    k.register_hook(lambda g: g * 100)
    y = (k * 3).sum()
    p.watch(y)
    p.value("grads", p.run("grad", lambda: t.autograd.grad(y, [k, h])))


@program("grad_unused_identity")
def _grad_unused(t, p):
    x = p.leaf("x", [1.0, 2.0])
    z = p.leaf("z", [1.0, 2.0])
    y = (x * 2).sum()
    p.watch(y)
    p.value("grads", p.run("grad", lambda: t.autograd.grad(y, [x, z], allow_unused=True)))
    p.counter("after")
    p.run("unused", lambda: t.autograd.grad((x * 3).sum(), [x, z]))
    p.value("materialized", p.run("mat", lambda: t.autograd.grad((x * 4).sum(), [x, z], materialize_grads=True)))


@program("grad_leaf_with_hook")
def _grad_leaf_hook(t, p):
    x = p.leaf("x", [1.0, 2.0])
    x.register_hook(lambda g: g * 7)
    y = (x * 2).sum()
    p.watch(y)
    p.value("grad", p.run("grad", lambda: t.autograd.grad(y, x)))
    p.value("x.grad", x.grad)


@program("pruning_min_topo")
def _min_topo(t, p):
    a = p.leaf("a", [1.0, 2.0])
    early = a.exp().sin()          # low topo, below a's use
    mid = early * 2
    k = mid.cos()
    y = (k * 3 + early).sum()
    p.watch(y)
    p.value("grad", p.run("grad", lambda: t.autograd.grad(y, [k])))


@program("x_times_x")
def _xx(t, p):
    x = p.leaf("x", [3.0])
    y = x * x
    p.watch(y)
    p.run("backward", y.backward)
    p.value("x.grad", x.grad)


@program("shared_subexpression")
def _shared(t, p):
    x = p.leaf("x", [1.0, -2.0, 0.5])
    h = x.tanh()
    y = (h * h + h.exp() * h.sin() - h / 2).sum()
    p.watch(y)
    p.run("backward", lambda: y.backward(retain_graph=True))
    p.value("x.grad", x.grad)
    p.run("again", y.backward)
    p.value("x.grad 2", x.grad)


# -- hooks ------------------------------------------------------------------------------------------------
@program("hook_order")
def _hook_order(t, p):
    x = p.leaf("x", [1.0, 2.0])
    h = x * 2
    y = (h * 3).sum()
    h.retain_grad()
    h.register_hook(lambda g: p.value("tensor_hook1", g) or g * 10)
    h.register_hook(lambda g: p.value("tensor_hook2", g))
    h.grad_fn.register_prehook(lambda go: p.value("prehook1", go))
    h.grad_fn.register_prehook(lambda go: (go[0] + 1,))
    h.grad_fn.register_hook(lambda gi, go: p.value("posthook", (gi, go)))
    p.watch(y)
    p.run("backward", y.backward)
    p.value("grads", (h.grad, x.grad))


@program("leaf_hooks")
def _leaf_hooks(t, p):
    w = p.leaf("w", [1.0, 2.0])
    z = (w * 3).sum()
    acc = z.grad_fn.next_functions[0][0].next_functions[0][0]
    w.register_hook(lambda g: g + 100)
    acc.register_prehook(lambda go: p.value("acc prehook", go))
    w.register_post_accumulate_grad_hook(lambda q: p.value("post acc", q.grad))
    acc.register_hook(lambda gi, go: p.value("acc posthook", (gi, go)))
    p.watch(z)
    p.run("backward", z.backward)
    p.value("w.grad", w.grad)


@program("hook_errors")
def _hook_errors(t, p):
    x = p.leaf("x", [1.0, 2.0])
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    p.run("arity", y.backward)
    y2 = (x * 2).sum()
    y2.grad_fn.register_prehook(lambda go: 3)
    p.run("non-tuple", y2.backward)
    y3 = x * 2
    y3.register_hook(lambda g: p.const([1.0, 1.0, 1.0]))
    p.run("shape", lambda: y3.sum().backward())
    x2 = p.leaf("x2", [1.0])
    x2.register_post_accumulate_grad_hook(lambda q: q)
    p.run("post acc", lambda: (x2 * 2).sum().backward())
    p.run("register", lambda: p.const([1.0]).register_hook(lambda g: g))


@program("hook_removal")
def _hook_removal(t, p):
    x = p.leaf("x", [1.0, 2.0])
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)
    pre = h.grad_fn.register_prehook(lambda go: (go[0] * 3,))
    handle.remove()
    pre.remove()
    p.run("backward", lambda: h.sum().backward())
    p.value("x.grad", x.grad)


# -- errors and saved tensors -----------------------------------------------------------------------------
@program("error_stops_engine")
def _error(t, p):
    x = p.leaf("x", [1.0, 1.0])
    a, b, c = x.exp(), x.sin(), x.cos()
    y = (a + b + c).sum()
    def boom(go):
        raise ValueError("boom")
    b.grad_fn.register_prehook(boom)
    p.watch(y)
    p.run("backward", y.backward)
    p.value("x.grad", x.grad)
    x2 = p.leaf("x2", [1.0, 2.0])
    p.run("next", lambda: (x2 * 2).sum().backward())
    p.value("x2.grad", x2.grad)


@program("backward_twice")
def _twice(t, p):
    x = p.leaf("x", [1.0, 2.0])
    for name, build in [("mul", lambda: x * x), ("add", lambda: x + 1), ("exp", lambda: x.exp()),
                        ("mul_scalar", lambda: x * 2), ("neg", lambda: -x), ("t", lambda: x.unsqueeze(0).t()),
                        ("where", lambda: t.where(x > 1, x, x * 0)), ("sum", lambda: x.sum() * 1),
                        ("mean", lambda: x.mean()), ("div", lambda: x / 2), ("cat", lambda: t.cat([x, x])),
                        ("mse", lambda: t.nn.functional.mse_loss(x, p.const([0.0, 1.0]))), ("sigmoid", lambda: x.sigmoid()),
                        ("view", lambda: x.view(2, 1)), ("select", lambda: x[0]), ("pow", lambda: x ** 2)]:
        y = build().sum()
        p.run(name + " 1", y.backward)
        p.run(name + " 2", y.backward)
    p.value("x.grad", x.grad)


@program("api_errors")
def _api_errors(t, p):
    x = p.leaf("x", [1.0, 1.0])
    z = p.leaf("z", [1.0, 1.0])
    y = (x * 2).sum()
    p.run("unused", lambda: t.autograd.grad(y, [x, z], retain_graph=True))
    p.run("mat false", lambda: t.autograd.grad(y, [x, z], retain_graph=True, materialize_grads=True,
                                               allow_unused=False))
    p.run("grad empty", lambda: t.autograd.grad(y, [], retain_graph=True))
    p.run("backward empty", lambda: y.backward(inputs=[], retain_graph=True))
    p.run("not requiring", lambda: t.autograd.grad(y, [p.const([1.0, 1.0])], retain_graph=True))
    p.run("no grad_fn", lambda: p.const([1.0, 1.0]).sum().backward())
    p.run("non-scalar", lambda: (x * 2).backward())
    p.run("shape", lambda: (x * 2).backward(p.const([1.0, 1.0, 1.0])))
    p.run("inputs not requiring", lambda: y.backward(inputs=[p.const([1.0, 1.0])], retain_graph=True))
    p.run("inputs unreachable", lambda: y.backward(inputs=[z], retain_graph=True))
    p.value("z.grad", z.grad)
    p.run("int scalar", lambda: t.autograd.grad(p.const([1, 2], dtype="int64").sum(), [x]))


# -- custom Function --------------------------------------------------------------------------------------
@program("custom_function")
def _custom(t, p):
    class Scale(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            ctx.save_for_backward(a, b)
            ctx.k = k
            return a * k, b * k
        @staticmethod
        def backward(ctx, g1, g2):
            a, b = ctx.saved_tensors
            p.value("backward got", (g1, g2, ctx.needs_input_grad))
            return g1 * ctx.k + b, None, g2 * a
    a = p.leaf("a", [1.0, 2.0])
    b = p.leaf("b", [0.5, -1.0])
    o1, o2 = Scale.apply(a, 3.0, b)
    p.counter("applied")
    y = (o1 * 2).sum()
    p.watch(y)
    p.run("backward", lambda: y.backward(retain_graph=True))
    p.value("grads", (a.grad, b.grad))
    with t.no_grad():
        r = Scale.apply(a, 2.0, b)
    p.counter("under no_grad")
    p.value("no_grad outputs", r)


@program("custom_function_errors")
def _custom_errors(t, p):
    class Few(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b
        @staticmethod
        def backward(ctx, g):
            return g
    class Shape(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2
        @staticmethod
        def backward(ctx, g):
            return p.const([1.0, 1.0, 1.0])
    class NonTensor(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k
        @staticmethod
        def backward(ctx, g):
            return g, g
    class Expandable(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.sum() * 2
        @staticmethod
        def backward(ctx, g):
            return g.expand(1, 2)
    a = p.leaf("a", [1.0, 2.0])
    b = p.leaf("b", [1.0, 2.0])
    p.run("few", lambda: Few.apply(a, b).sum().backward())
    p.run("shape", lambda: Shape.apply(a).sum().backward())
    p.run("non tensor", lambda: NonTensor.apply(a, 2.0).sum().backward())
    a.grad = None
    p.run("expandable", lambda: Expandable.apply(a).backward())
    p.value("a.grad", a.grad)


@program("custom_none_grad_schedules")
def _custom_none(t, p):
    class F(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b
        @staticmethod
        def backward(ctx, g):
            return g, None
    a = p.leaf("a", [1.0, 1.0])
    x = p.leaf("x", [1.0, 1.0])
    e = x.exp()
    e.grad_fn.register_prehook(lambda go: p.value("exp prehook", go))
    out = F.apply(a, e)
    p.watch(out)
    p.run("backward", lambda: out.sum().backward())
    p.value("grads", (a.grad, x.grad))


@program("reentrant")
def _reentrant(t, p):
    class Reent(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2
        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            with t.enable_grad():
                q = a.detach().requires_grad_()
                r = (q.exp() * 3).sin().sum()
                p.watch(r, tag="inner graph")
                t.autograd.backward(r)
                p.value("inner q.grad", q.grad)
            return g * 2
    x = p.leaf("x", [1.0, 2.0])
    y = p.leaf("y", [1.0, 2.0])
    s = y.exp()
    z = (s + Reent.apply(x)).sum()
    p.watch(z)
    p.run("backward", z.backward)
    p.value("grads", (x.grad, y.grad))


@program("create_graph_accumulation")
def _cg_acc(t, p):
    x = p.leaf("x", [1.0, 2.0])
    y = (x * x).sum()
    g = p.run("grad", lambda: t.autograd.grad(y, x, create_graph=True))
    p.counter("after grad")
    p.watch(*g, hooks=False, tag="grad graph")
    g2 = p.run("double", lambda: t.autograd.grad(g[0].sum(), x))
    p.value("double", g2)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y5 = (x * x * x).sum()
        p.run("backward cg", lambda: y5.backward(create_graph=True))
        p.value("x.grad", x.grad)
        p.watch(x.grad, hooks=False, tag="x.grad graph")
        y6 = (x * x).sum()
        p.run("backward cg 2", lambda: y6.backward(create_graph=True))
        p.watch(x.grad, hooks=False, tag="x.grad graph 2")


# -- random DAGs --------------------------------------------------------------------------------------------
_UNARY = ["exp", "sin", "cos", "tanh", "sigmoid", "neg", "sq", "half", "sum0", "relu"]
_BINARY = ["add", "mul", "sub", "div"]


def _random_dag(seed: int) -> Callable:
    rng = random.Random(seed)
    n_leaves = rng.randint(2, 4)
    steps = []
    for i in range(rng.randint(4, 14)):
        pool = n_leaves + i
        if rng.random() < 0.45:
            steps.append(("u", rng.choice(_UNARY), rng.randrange(pool)))
        else:
            steps.append(("b", rng.choice(_BINARY), rng.randrange(pool), rng.randrange(pool)))
    mode = rng.choice(["backward", "backward", "inputs", "grad", "grad_cg", "two_roots"])
    picks = rng.sample(range(n_leaves + len(steps)), k=min(2, n_leaves + len(steps)))

    def fn(t, p):
        vals = [p.leaf(f"l{i}", [0.3 + 0.2 * i, -0.4 + 0.1 * i, 0.9 - 0.3 * i]) for i in range(n_leaves)]
        for step in steps:
            if step[0] == "u":
                x = vals[step[2]]
                op = step[1]
                vals.append({"exp": lambda: x.exp(), "sin": lambda: x.sin(), "cos": lambda: x.cos(),
                             "tanh": lambda: x.tanh(), "sigmoid": lambda: x.sigmoid(), "neg": lambda: -x,
                             "sq": lambda: x * x, "half": lambda: x / 2, "relu": lambda: x.relu(),
                             "sum0": lambda: x.sum(0, keepdim=True).expand(3)}[op]())
            else:
                a, b = vals[step[2]], vals[step[3]]
                op = step[1]
                vals.append({"add": lambda: a + b, "mul": lambda: a * b, "sub": lambda: a - b,
                             "div": lambda: a / (b * b + 1)}[op]())
        out = vals[-1].sum() + vals[len(vals) // 2].sum()
        p.watch(out)
        chosen = [vals[i] for i in picks]
        if mode == "backward":
            p.run("backward", out.backward)
            p.value("grads", tuple(v.grad for v in vals[:n_leaves]))
        elif mode == "inputs":
            p.run("backward", lambda: out.backward(inputs=chosen))
            p.value("grads", tuple(v.grad for v in chosen))
        elif mode == "grad":
            p.value("grads", p.run("grad", lambda: t.autograd.grad(out, chosen, allow_unused=True)))
        elif mode == "grad_cg":
            gs = p.run("grad", lambda: t.autograd.grad(out, vals[:n_leaves], create_graph=True, allow_unused=True))
            p.counter("after")
            live = [g for g in gs if g is not None and g.requires_grad]
            if live:
                p.watch(*live, hooks=False, tag="grad graph")
        else:
            second = vals[-2].sum() if len(vals) > n_leaves + 1 else vals[0].sum()
            p.run("backward", lambda: t.autograd.backward([out, second]))
            p.value("grads", tuple(v.grad for v in vals[:n_leaves]))
        p.counter("end")
    return fn


for _seed in range(40):
    PROGRAMS[f"random_dag_{_seed}"] = _random_dag(_seed)


@program("bad_input")
def _bad_input(t, p):
    x = p.leaf("x", A23)
    v = p.leaf("v", V3)
    n = p.const([1, 2], dtype="int64")
    p.run("add str", lambda: x + "a")
    p.run("radd str", lambda: "a" + x)
    p.run("mul list", lambda: x * [1, 2])
    p.run("broadcast", lambda: x + p.const([1.0, 2.0]))
    p.run("mm shapes", lambda: x @ x)
    p.run("mm 3d", lambda: t.mm(x, p.const([A23])))
    p.run("dot sizes", lambda: v @ p.const([1.0, 2.0]))
    p.run("view", lambda: x.view(4))
    p.run("view noncontig", lambda: x.t().view(6))
    p.run("reshape", lambda: x.reshape(5, -1))
    p.run("two -1", lambda: x.view(-1, -1))
    p.run("sum dim", lambda: x.sum(2))
    p.run("select", lambda: x[5])
    p.run("select neg", lambda: x[-3])
    p.run("too many indices", lambda: x[0, 0, 0])
    p.run("transpose dim", lambda: x.transpose(0, 3))
    p.run("unsqueeze dim", lambda: x.unsqueeze(4))
    p.run("expand", lambda: x.expand(3, 3))
    p.run("expand fewer", lambda: x.expand(3))
    p.run("cat empty", lambda: t.cat([]))
    p.run("cat shapes", lambda: t.cat([x, v]))
    p.run("stack shapes", lambda: t.stack([x, x.t()]))
    p.run("int requires grad", lambda: t.tensor([1, 2], requires_grad=True))
    p.run("int requires_grad_", lambda: n.requires_grad_())
    p.run("nonleaf requires_grad False", lambda: (x * 2).requires_grad_(False))
    p.run("numpy requires grad", lambda: x.numpy())
    p.run("item", lambda: x.item())
    p.run("bool", lambda: bool(x))
    p.run("mean int", lambda: n.mean())
    p.run("where cond", lambda: t.where(x, x, x))
    p.run("t 3d", lambda: p.const([A23]).t())
    p.run("softmax dim", lambda: x.softmax(3))
    p.run("maximum scalar", lambda: t.maximum(x, 1.0))
    p.run("matmul 0d", lambda: x @ p.const(1.0))
    p.run("grad non-tensor", lambda: t.autograd.grad(x.sum(), [3]))
    p.run("backward twice grads", lambda: t.autograd.backward([x.sum(), x.sum()], [None]))
    p.run("sub bool", lambda: p.const([True], dtype="bool") - p.const([True], dtype="bool"))
    p.run("neg bool", lambda: -p.const([True], dtype="bool"))
    p.run("set grad shape", lambda: setattr(x, "grad", p.const([1.0])))
_op_all("max_dim", lambda t, a: a.max(1).values, A23)
_op_all("max_dim_keepdim", lambda t, a: a.max(0, keepdim=True).values, A23)
_op_all("max_dim_0d", lambda t, a: a.max(0).values, 1.5)


@program("bad_input_factories_and_args")
def _bad_args(t, p):
    x = p.leaf("x", A23)
    p.run("tensor str", lambda: t.tensor("abc"))
    p.run("tensor ragged", lambda: t.tensor([[1.0, 2.0], [3.0]]))
    p.run("tensor None", lambda: t.tensor(None))
    p.run("zeros str", lambda: t.zeros("a"))
    p.run("zeros negative", lambda: t.zeros(-1))
    p.run("mse reduction", lambda: t.nn.functional.mse_loss(x, x, reduction="bad"))
    p.run("softmax no dim", lambda: x.softmax())
    p.run("reshape bad", lambda: x.reshape("a"))
    p.run("sum dim str", lambda: x.sum("a"))
    p.run("register_hook non-callable", lambda: (x * 2).register_hook(5))
    p.run("backward grad type", lambda: (x * 2).sum().backward(5))
    p.run("grad outputs type", lambda: t.autograd.grad((x * 2).sum(), x, grad_outputs=[5]))
    p.run("device", lambda: t.zeros(2, device="tpu"))
    p.run("mean str", lambda: x.mean("a"))
    p.run("sum dim float", lambda: x.sum(1.5))
    p.run("view str", lambda: x.view("a"))
    p.run("ones str", lambda: t.ones("a"))
    p.run("ones negative", lambda: t.ones(-2))
    p.run("zeros tuple negative", lambda: t.zeros((2, -1)))
    p.run("zeros float", lambda: t.zeros(2.5))
    p.run("tensor dict", lambda: t.tensor({1: 2}))
    p.run("tensor object", lambda: t.tensor([object()]))
    p.run("tensor ragged deep", lambda: t.tensor([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0]]]))
    p.run("tensor number then list", lambda: t.tensor([1.0, [2.0]]))
    p.run("tensor mixed", lambda: t.tensor([1, "a"]))
    p.run("log_softmax no dim", lambda: x.log_softmax())
    p.run("unsqueeze str", lambda: x.unsqueeze("a"))
    p.run("transpose str", lambda: x.transpose("a", 1))
    p.run("expand str", lambda: x.expand("a"))
    p.run("device index", lambda: t.zeros(2, device="cuda:x"))


@program("failing_ops_take_seq_nrs")
def _failing_ops(t, p):
    """PyTorch creates an op's node before its kernel checks, so most failing ops still take a seq_nr."""
    x = p.leaf("x", A23)
    v = p.leaf("v", V3)
    cases = {
        "mul bcast": lambda: x * p.leaf("w", [1.0, 2.0]), "mm": lambda: x @ x, "mm 1d": lambda: t.mm(v, x),
        "dot": lambda: v @ p.leaf("u", [1.0, 2.0]), "mv": lambda: t.mv(x, p.const([1.0, 2.0])),
        "addmm": lambda: t.addmm(p.const([1.0, 2.0]), x, x), "cat": lambda: t.cat([x, v]),
        "stack": lambda: t.stack([x, x.t()]), "view": lambda: x.view(4), "view nc": lambda: x.t().view(6),
        "reshape": lambda: x.reshape(5), "expand": lambda: x.expand(3, 3), "index": lambda: x[5],
        "select dim": lambda: x.select(3, 0), "too many indices": lambda: x[:, :, 1:2],
        "transpose": lambda: x.transpose(0, 3), "unsqueeze": lambda: x.unsqueeze(4), "squeeze": lambda: x.squeeze(4),
        "sum dim": lambda: x.sum(3), "mean dim": lambda: x.mean(3), "softmax": lambda: x.softmax(3),
        "log_softmax": lambda: x.log_softmax(3), "max dim": lambda: x.max(3),
        "where": lambda: t.where(x > 0, x, p.const([1.0, 2.0])), "permute": lambda: x.permute(0),
        "maximum": lambda: t.maximum(x, p.const([1.0, 2.0])), "pow": lambda: x ** p.const([1.0, 2.0]),
        "linear": lambda: t.nn.functional.linear(x, p.const([[1.0, 2.0]] * 4)),
        "matmul 3d": lambda: t.matmul(p.leaf("b", [A23, A23]), p.const([[1.0, 2.0], [3.0, 4.0]])),
        "where cond dtype": lambda: t.where(x, x, x), "mask shape": lambda: x[p.const([True, False, True], "bool")],
        "mask shape after select": lambda: p.leaf("c", [A23, A23])[p.const([True, False, True], "bool"), 0],
    }
    for name, action in cases.items():
        p.run(name, action)
        p.counter(name)


# -- in-place ops (engine/_inplace.py) --------------------------------------------------------------------
@program("inplace_sgd_steps")
def _inplace_sgd(t, p):
    """The training-loop update: in place under no_grad, then zero_ the grad; w stays the same leaf."""
    w = p.leaf("w", [0.5, -1.0, 2.0])
    x = p.const([1.0, 2.0, 3.0])
    for step in range(3):
        loss = (w * x * w).sum()
        p.run(f"backward {step}", loss.backward)
        p.value(f"grad {step}", w.grad)
        with t.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
        p.value(f"w {step}", (w, w.is_leaf, w.requires_grad, w._version))
    p.counter("after the loop")


@program("inplace_rebases_history")
def _inplace_rebase(t, p):
    """f.mul_(2) on a non-leaf: one MulBackward0 (one seq_nr) becomes f's grad_fn, over its old history."""
    w = p.leaf("w", [1.0, 2.0])
    f = w.clone()
    p.counter("before mul_")
    f.mul_(w)
    p.counter("after mul_")
    f += 1
    f.sub_(w, alpha=0.5)
    f /= 4
    p.watch(f)
    p.value("f", (f, f._version))
    p.run("backward", lambda: f.sum().backward())
    p.value("w.grad", w.grad)


@program("inplace_errors")
def _inplace_errors(t, p):
    """A leaf that requires grad refuses in-place ops in grad mode; int += float cannot cast."""
    w = p.leaf("w", [1.0, 2.0])
    p.run("leaf add_", lambda: w.add_(1))
    i = p.const([1, 2], dtype="int64")
    p.run("int += 0.5", lambda: i.add_(0.5))
    p.run("shape", lambda: w.detach().add_(p.const([[1.0, 2.0], [3.0, 4.0]])))
    p.value("w unchanged", (w, w._version))


@program("inplace_saved_then_modified")
def _inplace_saved(t, p):
    """Backward refuses a saved tensor written in place since: a plain input, a leaf and a node's output."""
    w = p.leaf("w", [1.0, 2.0])
    x = p.const([3.0, 4.0])
    y = (w * x).sum()
    x.mul_(2)
    p.run("saved input", y.backward)
    a = w.exp()
    z = (a * 2).sum()
    with t.no_grad():
        a.add_(1)
    p.run("saved output", z.backward)
    u = (w * w).sum()
    with t.no_grad():
        w.detach().zero_()  # detach() shares memory and version with w
    p.run("saved leaf, through detach", u.backward)
    p.value("w", (w, w._version))


@program("inplace_fill_copy_views")
def _inplace_fill_copy(t, p):
    """zero_, fill_ and copy_ (broadcast and cast) write memory that views share, outside autograd."""
    x = p.const([[1.0, 2.0], [3.0, 4.0]])
    row = x[0]
    row.fill_(7.0)  # through the view, into x
    x.copy_(p.const([0.5, 1.5]))  # broadcast over the rows
    p.value("x", (x, x._version, row._version))
    i = p.const([1, 2], dtype="int64")
    i.copy_(p.const([2.9, -1.2]))  # copy_ casts, as torch does
    p.value("i", i)
    p.run("fill_ with a vector", lambda: x.fill_(p.const([1.0, 2.0])))
    w = p.leaf("w", [1.0, 2.0])
    y = (w * x[1]).sum()
    with t.no_grad():
        x.zero_()
    p.run("saved view of x", y.backward)


@program("inplace_on_expanded")
def _inplace_expanded(t, p):
    """Writing into an expand()ed tensor, whose elements share memory, is refused."""
    x = p.const([1.0, 2.0])
    e = x.expand(3, 2)
    p.run("add_ into expand", lambda: e.add_(1))
    p.value("x", x)


@program("inplace_fill_zero_copy_recorded")
def _inplace_fill_zero_copy(t, p):
    """zero_, fill_ (a number, a 0-dim tensor that requires grad) and copy_ (cast, broadcast) with history:
    ZeroBackward0, FillBackward2/3 and CopyBackwards, their seq_nrs, grads and second-order graphs."""
    w = p.leaf("w", [1.0, 2.0])
    v = p.leaf("v", 3.0)
    src = p.leaf("src", [0.5], dtype="float32")
    parts = []
    for tag, action in (("zero_", lambda f: f.zero_()), ("fill_ 4", lambda f: f.fill_(4.0)),
                        ("fill_ v", lambda f: f.fill_(v)), ("copy_ src", lambda f: f.copy_(src))):
        f = w * 1.0
        p.counter(f"before {tag}")
        action(f)
        p.counter(f"after {tag}")
        parts.append((f * w).sum())
    total = parts[0] + parts[1] + parts[2] + parts[3]
    p.watch(total)
    grads = p.run("grad", lambda: t.autograd.grad(total, (w, v, src), create_graph=True))
    p.value("grads", grads)
    if grads is not None:
        p.watch(*[g for g in grads if g.requires_grad], hooks=False, tag="formula graph")
    p.run("copy_ a number", lambda: w.detach().copy_(1.0))


@program("inplace_moves_retain_grad_not_hooks")
def _inplace_hooks(t, p):
    """Hooks registered before an in-place op see the old value's grad; later ones, and retain_grad, the new."""
    w = p.leaf("w", [1.0, 2.0])
    f = w * 1
    f.retain_grad()
    f.register_hook(lambda g: p.value("hook before", g))
    f.mul_(3)
    f.register_hook(lambda g: p.value("hook after", g))
    p.watch(f)
    p.run("backward", lambda: (f * f).sum().backward())
    p.value("grads", (f.grad, w.grad, f.retains_grad))
