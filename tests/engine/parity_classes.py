"""Small classes of divergence found by the differential fuzzer (tests/fuzz/FINDINGS.md), one program each with the
minimal repro, run on engine and torch by test_classes_parity.py.

Each is `fn(t, p)` (see parity.py).
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

V3 = [0.5, -1.0, 0.0]


def program(name: str):
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


@program("sign and sgn: nodes, saved values, ZeroTensor grads")
def _sign(t, p):
    a = p.leaf("a", V3)
    s, g = a.sign(), a.sgn()
    p.watch(s, g)
    p.value("sgn saved", (g.grad_fn._saved_self is a, g.grad_fn._saved_result.equal(g)))
    grad, = p.run("grad", lambda: t.autograd.grad(g.sum(), a))
    p.value("is zerotensor", (grad._is_zerotensor(), grad.requires_grad, tuple(grad.shape)))
    p.run("tolist", lambda: grad.tolist())
    p.run("numpy", lambda: grad.numpy())
    p.run("add_", lambda: grad.add_(1.0))
    p.value("propagation", ((grad * 3.0)._is_zerotensor(), (grad * a)._is_zerotensor(), (grad / 2.0)._is_zerotensor(),
                            (grad + 1.0)._is_zerotensor(), grad.sum()._is_zerotensor(), (-grad)._is_zerotensor(),
                            grad.clone()._is_zerotensor(), grad.detach()._is_zerotensor(), grad[0:2]._is_zerotensor()))
    p.value("materialised", (grad + 1.0, grad.clone(), grad[1]))
    s.sum().backward()
    p.value("a.grad", (a.grad._is_zerotensor(), a.grad.clone()))
    p.run("second backward into a ZeroTensor grad", lambda: a.sgn().sum().backward())


@program("mse_loss with broadcasting expands both operands")
def _mse_broadcast(t, p):
    a = p.leaf("a", [[0.5], [1.0]])
    b = p.leaf("b", [1.0, 2.0, 3.0])
    loss = p.run("loss", lambda: t.nn.functional.mse_loss(a, b))
    p.watch(loss)
    p.run("backward", lambda: loss.backward())
    p.value("grads", (a.grad, b.grad))
    c = p.leaf("c", [1.0, 2.0, 3.0])
    loss2 = t.nn.functional.mse_loss(c, p.const([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]), reduction="sum")
    p.watch(loss2)


@program("mixed float32 and float64 in the matrix products")
def _mixed_dtypes(t, p):
    f1, d1 = p.const([1.0, 2.0], dtype="float32"), p.const([1.0, 2.0])
    f2, d2 = p.const([[1.0, 2.0], [3.0, 4.0]], dtype="float32"), p.const([[1.0, 2.0], [3.0, 4.0]])
    w = p.leaf("w", [[1.0, 2.0], [3.0, 4.0]], dtype="float32")
    cases = {
        "dot": lambda: t.dot(f1, d1), "dot reversed": lambda: t.dot(d1, f1),
        "mv": lambda: t.mv(f2, d1), "mv reversed": lambda: t.mv(d2, f1),
        "addmm self": lambda: t.addmm(f2, f2, d2), "addmm mat1": lambda: t.addmm(f2, d2, f2),
        "addmm bias": lambda: t.addmm(d2, f2, f2), "addmm 1-D bias": lambda: t.addmm(f1, d2, d2),
        "linear": lambda: t.nn.functional.linear(w, d2), "linear bias": lambda: t.nn.functional.linear(w, w, d1),
        "linear 3-D": lambda: t.nn.functional.linear(w.unsqueeze(0), d2, f1),
        "mm": lambda: t.mm(w, d2), "2-D @ 1-D": lambda: d2 @ f1, "1-D @ 2-D": lambda: f1 @ d2,
        "bmm": lambda: t.bmm(w.unsqueeze(0), d2.unsqueeze(0)),
    }
    for tag, case in cases.items():
        p.run(tag, case)
        p.counter(tag)


@program("indexing a 0-dim tensor")
def _zero_dim_index(t, p):
    z = p.leaf("z", 3.0)
    for tag, key in (("int", 0), ("tuple", (0,)), ("slice", slice(0, 1)), ("None", None), ("...", Ellipsis),
                     ("None, int", (None, 0)), ("index tensor", [0])):
        p.run(tag, lambda key=key: z[t.tensor(key) if isinstance(key, list) else key])
        p.counter(tag)


@program("softmax and log_softmax of a 0-dim tensor")
def _zero_dim_softmax(t, p):
    for value in (2.0, float("nan"), float("-inf"), float("inf")):
        x = p.leaf("x", value)
        s, ls = t.softmax(x, 0), t.log_softmax(x, 0)
        p.value(f"{value}", (s, ls))
        p.run(f"{value} grad", lambda s=s, ls=ls, x=x: t.autograd.grad(s + ls, x))
    rows = p.leaf("rows", [[1.0, float("-inf")], [float("-inf"), float("-inf")]])
    p.value("rows", (t.softmax(rows, 1), t.log_softmax(rows, 1)))


@program("failed reshape and view take the seq_nrs torch takes")
def _failed_reshape(t, p):
    a = p.leaf("a", V3)
    x = a * 1.0
    for tag, op in (("reshape to 5", lambda: x.reshape(5)), ("view to 5", lambda: x.view(5)),
                    ("reshape two -1", lambda: x.reshape(-1, -1)), ("view of t()", lambda: x.unsqueeze(0).t().view(3)),
                    ("reshape of t()", lambda: x.unsqueeze(1).expand(3, 2).t().reshape(6))):
        p.run(tag, op)
        p.counter(tag)


@program("post-accumulate-grad hooks: one returns a value")
def _post_acc_returns(t, p):
    w = p.leaf("w", [1.0, 2.0])
    seen = []
    w.register_post_accumulate_grad_hook(lambda v: (seen.append("first"), 5.0)[1])
    w.register_post_accumulate_grad_hook(lambda v: seen.append("second"))
    p.run("backward", lambda: (w * 2.0).sum().backward())
    p.value("seen", seen)
    p.value("grad", w.grad)


@program("a backward that raised: which nodes were released")
def _raised_release(t, p):
    w = p.leaf("w", [1.0, 2.0])
    x = w.exp()
    y = x * x
    x.register_hook(lambda g: (_ for _ in ()).throw(ValueError("boom")))
    p.run("backward", lambda: y.sum().backward())
    p.run("y saved", lambda: y.grad_fn._saved_self)
    p.run("x saved", lambda: x.grad_fn._saved_result)
    p.run("again", lambda: y.sum().backward())
    p.value("grad", w.grad)


@program("gradients summed in an input buffer: reused in place, their versions counted")
def _buffer_versions(t, p):
    x = p.leaf("x", V3)
    y = x * 2.0
    z = (y * y).sum() + y.sum()
    gx, gy = p.run("grad", lambda: t.autograd.grad(z, [x, y]))
    p.value("versions", (gx._version, gy._version))
    w = p.leaf("w", V3)
    (w * w + w).sum().backward()
    p.value("w.grad version", (w.grad._version, w.grad))
    kept = []
    u = p.leaf("u", V3)
    v = u * 3.0
    v.register_hook(lambda g: kept.append(g))  # the hook holds the first grad: it may not be summed into
    (v.exp() + v).sum().backward()
    p.value("held", (kept[0]._version, u.grad._version, u.grad))


@program("1-D @ 2-D and linear: versions of their results")
def _matmul_versions(t, p):
    v = p.leaf("v", V3)
    m = p.leaf("m", [[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
    b = p.leaf("b", [0.1, 0.2])
    out = v @ m
    p.value("1-D @ 2-D", (out._version, out._is_view(), out.grad_fn.name()))
    lin = t.nn.functional.linear(v, m.t())
    lin_b = t.nn.functional.linear(v, m.t(), b)
    strided = t.nn.functional.linear(t.linspace(0.0, 1.0, 6, dtype=t.float64)[::2], m.t(), b)
    nd = t.nn.functional.linear(t.ones(2, 4, 3, dtype=t.float64).transpose(0, 1), m.t(), b)
    p.value("linear", tuple((r._version, r.grad_fn.name()) for r in (lin, lin_b, strided, nd)))
    p.watch(out, lin_b, strided, nd)


@program("a failed where takes its node's seq_nr")
def _where_fails(t, p):
    v = p.leaf("v", V3)
    p.run("float condition", lambda: t.where(v, v, 0.0))
    p.counter("float condition")
    p.run("sizes", lambda: t.where(v > 0, v, t.ones(4, dtype=t.float64)))
    p.counter("sizes")


@program("0-dim bool masks: a new dim of size 1, masked")
def _scalar_masks(t, p):
    v = p.leaf("v", [-1.0, 2.0])
    z = t.dot(v, v)
    p.run("z[z < 0] = 0", lambda: z.__setitem__(z < 0, 0.0))
    p.counter("false mask")
    z2 = t.dot(v, v)
    p.run("z2[z2 > 0] = 1", lambda: z2.__setitem__(z2 > 0, 1.0))
    p.counter("true mask")
    p.value("values", (z, z2, z._version, z2._version))
    p.watch(z, z2)
    x = v * 1.0
    p.value("getitem", tuple(tuple(x[k].shape) for k in (t.tensor(True), t.tensor(False))))
    p.watch(x[t.tensor(True)], x[0, t.tensor(True)])
    plain = p.const([[1.0, 2.0], [3.0, 4.0]])
    plain[t.tensor(True)] = 5.0
    p.value("plain", (plain, plain._version))


@program("grads' versions: viewed sums, pass-through grads, .grad summed in place, cloned .grad")
def _grad_versions(t, p):
    v1 = p.leaf("v1", [[1.0, -2.0, 3.0], [-4.0, 5.0, 6.0]])
    v3 = p.leaf("v3", 1.0)
    v4 = v3.mul(v1.mean(dim=-1))
    v4.add_(v3, alpha=0.5)
    v4.backward(t.full_like(v4, 0.5))
    p.value("summed into a viewed sum", (v3.grad._version, v1.grad._version))
    b = p.leaf("b", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    c = b - b
    c.zero_()
    g = p.run("grad", lambda: t.autograd.grad((c.view(1, 6) ** 2).mean(), [b, c]))
    p.value("pass-through grad", tuple(x._version for x in g))
    w = p.leaf("w", V3)
    y = w.tanh()
    y.backward(gradient=t.ones_like(y), retain_graph=True)
    first = w.grad
    w.backward(gradient=t.ones_like(w))
    p.value(".grad summed in place", (first._version, w.grad._version, first is w.grad))
    q = p.leaf("q", V3)
    q.sum().backward(create_graph=True)
    q.grad.zero_()
    p.value("cloned .grad", q.grad._version)


@program("in-place ops whose operand overlaps the written memory in part")
def _partial_overlap(t, p):
    a = p.leaf("a", [1.0, 2.0, 3.0, 4.0])
    x = a * 1.0
    p.run("mul_ with history", lambda: x[1:].mul_(x[:-1]))
    p.counter("mul_ with history")
    q = a * 1.0
    p.run("sub_ of the transpose", lambda: q.view(2, 2).sub_(q.view(2, 2).t()))
    p.counter("sub_ of the transpose")
    y = p.const([0.0, 1.0, 2.0, 3.0])
    p.run("add_ shifted", lambda: y[1:].add_(y[:-1]))
    p.run("copy_ shifted", lambda: y[1:].copy_(y[:-1]))
    p.run("add_ itself", lambda: y.add_(y))
    p.run("add_ disjoint", lambda: y[2:].add_(y[:2]))
    p.value("y", (y, y._version))
