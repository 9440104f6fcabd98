"""Programs of the Tensor surface (issue 12) run on both engine and torch by test_surface_parity.py.

Each is `fn(t, p)`; see parity.py. Data is written out, so both modules see the same numbers.
"""
from __future__ import annotations

from typing import Any, Callable

from tests.engine.parity_programs import A23, B23, POS23, V3, _forward_and_grads

PROGRAMS: dict[str, Callable] = {}

A234 = [[[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, 0.9], [0.2, 0.4, -0.6, 1.1]],
        [[1.1, 0.4, -0.9, -0.3], [0.2, -1.3, 0.8, 0.6], [-0.5, 0.7, 1.2, -1.0]]]
B242 = [[[0.1, 0.2], [0.3, -0.4], [0.5, 0.6], [-0.7, 0.8]],
        [[0.9, -1.0], [1.1, 0.2], [-0.3, 0.4], [0.5, 0.6]]]


def program(name: str):
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _op(name: str, build: Callable, *data: Any) -> None:
    """Forward graph, formula graph under create_graph, and second order, for every leaf."""
    def fn(t, p):
        leaves = [p.leaf(f"x{i}", d) for i, d in enumerate(data)]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *leaves)
    PROGRAMS[f"op_{name}"] = fn


# -- bugs ------------------------------------------------------------------------------------------------
@program("bug_double_backward_through_grad")
def _hvp(t, p):
    """Hessian-vector product through the `.grad` made by backward(create_graph=True)."""
    x = p.leaf("x", V3)
    y = (x ** 3).sum()
    p.run("backward", lambda: y.backward(create_graph=True))
    g = x.grad
    p.watch(g, hooks=False, tag="grad graph")
    p.value("grad", g)
    v = p.const([1.0, 0.5, 0.25])
    hv = p.run("hvp", lambda: t.autograd.grad((g * v).sum(), x))
    p.value("hvp", hv)
    p.counter("after")


@program("bug_gradient_penalty")
def _penalty(t, p):
    """The gradient-penalty pattern: backward of a loss made of a create_graph grad."""
    w = p.leaf("w", A23)
    x = p.leaf("x", B23)
    out = (w * x).tanh().sum()
    out.backward(create_graph=True)
    penalty = (x.grad ** 2).sum()
    p.watch(penalty, hooks=False)
    w.grad = None
    p.run("backward", penalty.backward)
    p.value("w.grad", w.grad)
    p.counter("after")


@program("bug_post_accumulate_hook_edits_grad")
def _post_acc(t, p):
    """A post-accumulate-grad hook that edits `.grad` in place: the node's post-hooks see the edit."""
    w = p.leaf("w", V3)

    def edit(param):
        param.grad.mul_(10)

    w.register_post_accumulate_grad_hook(edit)
    acc = (w * 1).grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: p.value("post hook grad_outputs", go))
    p.run("backward", (w * 2).sum().backward)
    p.value("w.grad", w.grad)
    p.run("backward again", (w * 2).sum().backward)
    p.value("w.grad again", w.grad)


@program("bug_accumulate_steal_or_clone")
def _steal(t, p):
    """Which first grads are adopted (shared) and which are cloned: seen through in-place edits."""
    a = p.leaf("a", V3)
    b = p.leaf("b", V3)
    kept = []
    b.register_hook(lambda g: kept.append(g))
    ((a + b) * 2).sum().backward()  # one grad object reaches both leaves
    a.grad.mul_(3)
    p.value("a, b, kept", (a.grad, b.grad, kept[0]))
    c = p.leaf("c", V3)
    g = p.const([1.0, 2.0, 3.0])
    (c + 0).backward(g)  # the user's tensor passes through unchanged: cloned
    c.grad.mul_(2)
    p.value("c.grad, g", (c.grad, g))
    d = p.leaf("d", V3)
    d.sum().backward()  # an expanded grad breaks the layout contract: cloned
    d.grad.add_(1)
    p.value("d.grad", d.grad)


@program("bug_long_has_no_grad_fn")
def _long(t, p):
    x = p.leaf("x", [1.5, -2.5, 0.2])
    for name in ("long", "bool"):
        r = getattr(x, name)()
        p.value(name, (r, r.grad_fn is None, r.requires_grad))
    r = x.to(t.int64)
    p.value("to int64", (r, r.grad_fn is None, r.requires_grad))
    r = x.to(t.float32)
    p.watch(r)
    p.counter("after")
