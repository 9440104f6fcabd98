"""Programs on views, run on engine and torch by test_views_parity.py: which ops make views (`_is_view`, `_base`),
what a view's requires_grad and grad_fn are (made under no_grad, after its base changed, after
`requires_grad_()` of its base), AsStridedBackward0 regenerated when a view's memory was written, `as_strided`,
and in-place ops with history through views (CopySlices) with retain_grad and hooks.

Each is `fn(t, p)` (see parity.py). Writes through views with `t[key] = v` are in parity_setitem.py.
"""
from __future__ import annotations

from typing import Any, Callable

PROGRAMS: dict[str, Callable] = {}

A34 = [[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, 0.9], [-0.4, 1.1, 0.6, -2.0]]
V4 = [0.3, -0.8, 1.4, 0.2]


def program(name: str):
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


_VIEW_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "t()": lambda t, x: x.t(),
    "T": lambda t, x: x.T,
    "mT": lambda t, x: x.mT,
    "permute": lambda t, x: x.permute(1, 0),
    "transpose": lambda t, x: x.transpose(0, 1),
    "view": lambda t, x: x.view(4, 3),
    "view(-1)": lambda t, x: x.view(-1),
    "reshape (a view)": lambda t, x: x.reshape(2, 6),
    "reshape (a copy)": lambda t, x: x.t().reshape(12),
    "flatten": lambda t, x: x.flatten(),
    "unsqueeze": lambda t, x: x.unsqueeze(1),
    "squeeze": lambda t, x: x.unsqueeze(0).squeeze(0),
    "expand": lambda t, x: x[:1].expand(3, 4),
    "select": lambda t, x: x.select(1, 2),
    "x[1]": lambda t, x: x[1],
    "x[:]": lambda t, x: x[:],
    "x[0:2]": lambda t, x: x[0:2],
    "x[::2]": lambda t, x: x[::2],
    "x[...]": lambda t, x: x[...],
    "x[:, :]": lambda t, x: x[:, :],
    "x[:, 1:3]": lambda t, x: x[:, 1:3],
    "x[None]": lambda t, x: x[None],
    "x[1, 2]": lambda t, x: x[1, 2],
    "unbind": lambda t, x: x.unbind(1)[2],
    "split": lambda t, x: x.split(2)[1],
    "chunk": lambda t, x: x.chunk(2, 1)[0],
    "as_strided": lambda t, x: x.as_strided((2, 2), (1, 4), 1),
    "detach": lambda t, x: x.detach(),
    "clone": lambda t, x: x.clone(),
    "contiguous (already)": lambda t, x: x.contiguous(),
    "contiguous (a copy)": lambda t, x: x.t().contiguous(),
    "x[idx]": lambda t, x: x[t.tensor([0, 2])],
    "x[mask]": lambda t, x: x[x.detach() > 0],
    "view of a view": lambda t, x: x[1:].t()[0],
}


def _view_facts(x: Any, y: Any) -> tuple:
    base = y._base
    return (y._is_view(), base is x, base is None, y.requires_grad, y.is_leaf,
            None if y.grad_fn is None else y.grad_fn.name(), tuple(y.shape), y.is_contiguous())


for _name, _op in _VIEW_OPS.items():
    def _make(op: Callable) -> Callable:
        def run(t, p):
            a = p.leaf("a", A34)
            x = a * 1.0
            p.run("op", lambda: p.value("facts", _view_facts(x, op(t, x))))
            p.counter("after")
            with t.no_grad():
                p.run("no_grad", lambda: p.value("no_grad facts", _view_facts(x, op(t, x))))
            p.counter("after no_grad")
            plain = p.const(A34)
            p.run("plain", lambda: p.value("plain facts", _view_facts(plain, op(t, plain))))
            y = op(t, x)
            p.watch(y)
            p.run("backward", lambda: (y * y).sum().backward())
            p.value("a.grad", a.grad)
        return run
    program(f"view op {_name}")(_make(_op))


@program("view made under no_grad of a tensor that requires grad")
def _no_grad_view(t, p):
    a = p.leaf("a", A34)
    with t.no_grad():
        leaf_view = a[0]
    p.value("leaf view", (leaf_view.requires_grad, leaf_view.is_leaf, leaf_view.grad_fn is None))
    y = (leaf_view * 2.0).sum()
    p.counter("used")
    p.watch(y)
    p.run("backward", lambda: y.backward())
    p.value("grads", (a.grad, leaf_view.grad))
    x = a * 1.0
    with t.no_grad():
        nv = x[1]
    p.value("non-leaf view", (nv.requires_grad, nv.is_leaf, nv.grad_fn is None))
    z = (nv * x[2]).sum()
    p.watch(z)
    p.run("backward 2", lambda: z.backward())
    p.value("a.grad 2", a.grad)
    with t.no_grad():
        nv.mul_(2.0)  # both in no_grad: allowed
        p.value("version", nv._version)


@program("base requires_grad_ after the view was made")
def _base_requires_grad_later(t, p):
    a = p.const(A34)
    v = a[0:2]
    p.value("before", v.requires_grad)
    a.requires_grad_()
    p.value("after", (v.requires_grad, v.is_leaf, v.grad_fn is None))
    y = (v * 3.0).sum()
    p.counter("used")
    p.run("backward", lambda: y.backward())
    p.value("grads", (a.grad, v.grad))


@program("views regenerate AsStridedBackward0 after their base is written")
def _regenerate(t, p):
    a = p.leaf("a", A34)
    x = a * 2.0
    row, col, sub = x[1], x[:, 2], x[1:, ::2]
    p.counter("views made")
    x.mul_(3.0)
    p.counter("base written")
    p.value("row", row.grad_fn.name())
    p.counter("row read")
    p.value("row again", row.grad_fn.name())
    p.counter("row read again")
    y = (col * sub[0, 1]).sum() + row.sum()
    p.counter("used")
    p.watch(y)
    p.run("backward", lambda: y.backward())
    p.value("a.grad", a.grad)


@program("as_strided: values, grads, second order, errors")
def _as_strided(t, p):
    a = p.leaf("a", A34)
    x = a * 1.0
    y = x.as_strided((3, 2), (4, 2), 1)
    p.value("y", y)
    p.watch(y)
    over = x.as_strided((3, 3), (1, 1))  # elements read more than once: their grads add up
    p.value("over", over)
    grads = p.run("grad", lambda: t.autograd.grad((y * y).sum() + (over * 2.0).sum(), a, create_graph=True))
    p.value("grads", grads)
    p.run("too far", lambda: x.as_strided((4, 4), (4, 1), 2))
    p.run("negative offset", lambda: x.as_strided((2,), (1,), -1))


@program("in place through two views of one base")
def _two_views(t, p):
    a = p.leaf("a", A34)
    w = p.leaf("w", V4)
    x = a * 1.0
    top, bottom = x[0], x[2]
    top.add_(w)
    bottom.mul_(w)
    x[1, 1:3].sub_(w[:2])
    p.counter("written")
    p.watch(x, top, bottom)
    grads = p.run("grad", lambda: t.autograd.grad((x * x).sum(), [a, w], create_graph=True))
    p.value("grads", grads)
    second = p.run("second", lambda: t.autograd.grad(grads[1].sum(), [a, w], allow_unused=True))
    p.value("second", second)


@program("retain_grad and hooks on a view written in place")
def _retain_and_hooks(t, p):
    a = p.leaf("a", A34)
    w = p.leaf("w", V4)
    x = a * 1.0
    row = x[1]
    row.retain_grad()
    seen = []
    row.register_hook(lambda g: seen.append(("before", g.tolist())))
    x.retain_grad()
    row.mul_(w)
    row.register_hook(lambda g: seen.append(("after", g.tolist())))
    y = (x * 2.0).sum() + (row * row).sum()
    p.watch(y)
    p.run("backward", lambda: y.backward())
    p.value("seen", seen)
    p.value("grads", (a.grad, w.grad, row.grad, x.grad))


@program("backward twice through CopySlices")
def _twice(t, p):
    a = p.leaf("a", A34)
    x = a * 1.0
    x[0].mul_(2.0)
    y = x.sum()
    p.run("first", lambda: y.backward())
    p.run("second", lambda: y.backward())
    z = (a * 1.0)
    z[1:].add_(1.0)
    out = z.sum()
    p.run("retain", lambda: out.backward(retain_graph=True))
    p.run("again", lambda: out.backward())
    p.value("a.grad", a.grad)


def _saved_then_written(t, p, tag: str, make: Callable, write: Callable) -> None:
    """Save a tensor (by `make`), change it (by `write`), and report backward's error: which node it names."""
    def run():
        out = make()
        write()
        out.sum().backward()
    p.run(tag, run)
    p.counter(tag)


@program("saved tensor modified: the error names the node as it is now")
def _modified_names(t, p):
    a = p.leaf("a", V4)
    w = p.leaf("w", V4)
    cases = {
        "input rebased": lambda x: (lambda: x.pow(2), lambda: x.add_(1.0)),
        "input rebased twice": lambda x: (lambda: x ** x, lambda: x.mul_(2.0)),
        "output written": lambda x: (lambda: x.exp(), None),
        "view, base written": lambda x: (lambda: x[:2] * x[:2], lambda: x.add_(1.0)),
        "view written": lambda x: (lambda: x[:2].sin(), lambda: x[:2].mul_(2.0)),
        "masked_fill_": lambda x: (lambda: x.sin(), lambda: x.masked_fill_(x.detach() > 0, 0.0)),
    }
    for tag, case in cases.items():
        x = a * 1.0
        make, write = case(x)
        if write is None:  # write the saved output itself
            made = {}

            def make_and_keep(make=make, made=made):
                made["y"] = make()
                return made["y"]
            _saved_then_written(t, p, tag, make_and_keep, lambda made=made: made["y"].add_(1.0))
        else:
            _saved_then_written(t, p, tag, make, write)
    for tag, op in (("PowBackward1", lambda x: x.pow(w)), ("PowBackward2", lambda x: 2.0 ** x),
                    ("RsubBackward1", lambda x: 1 - x), ("CopyBackwards", lambda x: x.copy_(w * 2.0)),
                    ("CopySlices", lambda x: x[0:2].mul_(2.0))):
        x = a * 1.0
        z = op(x)
        q = z * z
        with t.no_grad():
            z.add_(1.0)
        p.run(tag, lambda q=q: q.sum().backward())


@program("strides of size-1 dims")
def _size_one_strides(t, p):
    """The strides torch gives a view's size-1 dims (which address nothing, so numpy picks its own): view and
    reshape of permuted, sliced and expanded tensors, unsqueeze of a slice; mm saves such strides."""
    x = p.leaf("x", A34)
    for tag, build in (("mT view", lambda: x.t().unsqueeze(0).mT.reshape(4, 3, 1)),
                       ("column view", lambda: x[:, 1:2].view(1, 3, 1)),
                       ("row of a transpose", lambda: x.t()[:1].view(1, 1, 3)),
                       ("permuted with a unit dim", lambda: x.view(3, 1, 4).permute(2, 1, 0).reshape(4, 3, 1, 1)),
                       ("unsqueeze of a slice", lambda: x[:, :1].unsqueeze(1)),
                       ("unsqueeze last", lambda: x[0].unsqueeze(-1)),
                       ("expanded, viewed", lambda: x[:1].expand(2, 4).unsqueeze(0).view(1, 2, 1, 4))):
        out = build()
        p.value(tag, (tuple(out.shape), out.stride()))
    m = x.t()[:, :1].reshape(1, 4).t()
    y = m.mm(p.leaf("w", [[0.5, -1.0]]))
    p.value("mm saved strides", (y.grad_fn._saved_self_sym_strides, y.grad_fn._saved_mat2_sym_strides))
