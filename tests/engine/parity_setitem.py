"""Programs for `t[key] = v`, index_put_ and masked_fill_, run on engine and torch by test_setitem_parity.py.

Each is `fn(t, p)` (see parity.py). Plain tensors and no_grad check values and `_version`; tensors with history
check the node torch records (IndexPutBackward0, MaskedFillBackward0/1, CopyBackwards, FillBackward3), the
seq_nrs, and grads of both the old history and the value, first and second order; writes through a view with
history (torch's CopySlices and the view's AsStridedBackward0) likewise.
"""
from __future__ import annotations

from typing import Any, Callable

from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}

A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
V3 = [0.3, -0.8, 1.4]


def program(name: str):
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _plain_write(name: str, write: Callable[[Any, Any], Any], dtype: str = "float32") -> None:
    """Without history: the value written and how far `_version` moved, or the error."""
    @program(f"plain {name}")
    def run(t, p):
        x = p.const(A23, dtype=dtype)
        before = x._version
        p.run("write", lambda: write(t, x))
        p.value("x", x)
        p.value("version", x._version - before)

    @program(f"no_grad leaf {name}")
    def run_no_grad(t, p):
        x = p.leaf("x", A23, dtype=dtype)
        view = x.detach()
        before = x._version
        with t.no_grad():
            p.run("write", lambda: write(t, x))
        p.value("x", x)
        p.value("version", x._version - before)
        p.value("detached version", view._version - before)
        p.value("grad_fn", None if x.grad_fn is None else x.grad_fn.name())


_WRITES: dict[str, Callable] = {
    "mask = 0": lambda t, x: x.__setitem__(x > 0, 0),
    "mask = 0-dim tensor": lambda t, x: x.__setitem__(x > 0, t.tensor(5.0, dtype=x.dtype)),
    "mask = vector": lambda t, x: x.__setitem__(x > 0, t.tensor([7.0, 8.0, 9.0], dtype=x.dtype)),
    "mask matches nothing": lambda t, x: x.__setitem__(x > 100, 0),
    "mask over dim 0": lambda t, x: x.__setitem__(t.tensor([True, False]), 1.5),
    "slice then mask": lambda t, x: x.__setitem__((slice(None), t.tensor([True, False, True])), 1.5),
    "index tensor = number": lambda t, x: x.__setitem__(t.tensor([1]), 2.0),
    "index list = number": lambda t, x: x.__setitem__([0, 1], 4.0),
    "two index tensors": lambda t, x: x.__setitem__((t.tensor([0, 1]), t.tensor([1, 2])), t.tensor([5.0, 6.0],
                                                                                                  dtype=x.dtype)),
    "index, leading ones": lambda t, x: x.__setitem__(t.tensor([0, 1]), t.tensor([[[1.0, 2.0, 3.0]]],
                                                                                 dtype=x.dtype)),
    "int = number": lambda t, x: x.__setitem__(0, 3.0),
    "int, int = number (one element)": lambda t, x: x.__setitem__((1, 2), 7.0),
    "int, int = 0-dim tensor": lambda t, x: x.__setitem__((0, 1), t.tensor(2.5, dtype=x.dtype)),
    "row then int = number": lambda t, x: x[1].__setitem__(0, 9.0),
    "int = tensor": lambda t, x: x.__setitem__(1, t.tensor([1.0, 2.0, 3.0], dtype=x.dtype)),
    "[:, 0] = number": lambda t, x: x.__setitem__((slice(None), 0), 3.0),
    "[0, 1:] = tensor": lambda t, x: x.__setitem__((0, slice(1, None)), t.tensor([4.0, 5.0], dtype=x.dtype)),
    "[...] = number": lambda t, x: x.__setitem__(Ellipsis, 3.0),
    "[None] = number": lambda t, x: x.__setitem__(None, 3.0),
    "[False] = number": lambda t, x: x.__setitem__(False, 3.0),
    "[True] = number": lambda t, x: x.__setitem__(True, 3.0),
    "index_put_": lambda t, x: x.index_put_((t.tensor([0, 1]),), t.tensor(2.0, dtype=x.dtype)),
    "index_put_ list": lambda t, x: x.index_put_([t.tensor([1, 0]), t.tensor([2, 2])], t.tensor([1.0, 2.0],
                                                                                                 dtype=x.dtype)),
    "index_put_ accumulate": lambda t, x: x.index_put_((t.tensor([0, 0]),), t.tensor(2.0, dtype=x.dtype),
                                                       accumulate=True),
    "index_put_ mask": lambda t, x: x.index_put_((x < 0,), t.tensor([1.0, 2.0, 3.0], dtype=x.dtype)),
    "masked_fill_": lambda t, x: x.masked_fill_(x > 0, 0.0),
    "masked_fill_ broadcast mask": lambda t, x: x.masked_fill_(t.tensor([True, False, True]), 1.0),
    "masked_fill_ 0-dim tensor": lambda t, x: x.masked_fill_(x > 0, t.tensor(2.0, dtype=t.float64)),
    # errors
    "mask shape": lambda t, x: x.__setitem__(t.tensor([True, False, True]), 1.0),
    "2-d mask shape": lambda t, x: x.__setitem__(t.ones(3, 2, dtype=t.bool), 1.0),
    "value shape, mask": lambda t, x: x.__setitem__(x > -100, t.ones(5, dtype=x.dtype)),
    "value shape, index": lambda t, x: x.__setitem__(t.tensor([0, 1]), t.ones(2, dtype=x.dtype)),
    "value shape, index 3-d": lambda t, x: x.__setitem__(t.tensor([0, 1]), t.ones(2, 1, 3, dtype=x.dtype)),
    "index out of range": lambda t, x: x.__setitem__(t.tensor([0, 5]), 1.0),
    "negative index out of range": lambda t, x: x.__setitem__(t.tensor([-3]), 1.0),
    "int out of range": lambda t, x: x.__setitem__(5, 1.0),
    "second int out of range": lambda t, x: x.__setitem__((0, 7), 1.0),
    "slice value shape": lambda t, x: x.__setitem__((slice(None), 0), t.ones(3, dtype=x.dtype)),
    "int value shape": lambda t, x: x.__setitem__(0, t.ones(2, dtype=x.dtype)),
    "value dtype": lambda t, x: x.__setitem__(x > -100, t.ones(6, dtype=t.float64 if x.dtype == t.float32
                                                                else t.float32)),
    "index_put_ out of range": lambda t, x: x.index_put_((t.tensor([0, 5]),), t.tensor(1.0, dtype=x.dtype)),
    "index_put_ too many": lambda t, x: x.index_put_((t.tensor([0]),) * 3, t.ones(1, dtype=x.dtype)),
    "index_put_ float index": lambda t, x: x.index_put_((t.tensor([0.0]),), t.ones(1, dtype=x.dtype)),
    "index_put_ None": lambda t, x: x.index_put_((None, t.tensor([0])), t.ones(2, dtype=x.dtype)),
    "index_put_ number": lambda t, x: x.index_put_((t.tensor([0]),), 1.0),
    "index_put_ dtype": lambda t, x: x.index_put_((t.tensor([0]),), t.ones(3, dtype=t.int64)),
    "masked_fill_ float mask": lambda t, x: x.masked_fill_(t.ones(2, 3), 1.0),
    "masked_fill_ mask grows": lambda t, x: x.masked_fill_(t.ones(2, 2, 3, dtype=t.bool), 1.0),
    "masked_fill_ mask mismatch": lambda t, x: x.masked_fill_(t.ones(2, dtype=t.bool), 1.0),
    "masked_fill_ 1-d value": lambda t, x: x.masked_fill_(x > 0, t.ones(1)),
}

for _name, _write in _WRITES.items():
    _plain_write(_name, _write)


@program("plain int tensor, mask = float")
def _int_tensor(t, p):
    x = p.const([[0, 1, 0], [2, 0, 3]], dtype="int64")
    x[x == 0] = 1.5
    p.value("x", x)
    p.value("version", x._version)


# -- with history: the node, its seq_nr, grads of the old value and of v -----------------------------------
def _history(name: str, write: Callable[[Any, Any, Any], Any], create_graph: bool = True) -> None:
    @program(f"history {name}")
    def run(t, p):
        a = p.leaf("a", A23)
        w = p.leaf("w", V3)

        def build(a, w):
            x = a * 1.5
            v = w * 2.0
            before = x._version
            write(t, x, v)
            p.value("version", x._version - before)
            return x
        _forward_and_grads(t, p, build, a, w, create_graph=create_graph)


_HISTORY: dict[str, Callable] = {
    "mask = 0": lambda t, x, v: x.__setitem__(x.detach() > 0, 0),
    "mask = v.sum()": lambda t, x, v: x.__setitem__(x.detach() > 0, v.sum()),
    "mask = v": lambda t, x, v: x.__setitem__(x.detach() > 0.6, v),
    "index = v": lambda t, x, v: x.__setitem__(t.tensor([0, 1]), v),
    "index = number": lambda t, x, v: x.__setitem__(t.tensor([1]), 2.0),
    "index = v broadcast": lambda t, x, v: x.__setitem__(t.tensor([1, 0, 1]), v[:1]),
    "index, leading ones": lambda t, x, v: x.__setitem__(t.tensor([0, 1]), v.reshape(1, 1, 3)),
    "slice then mask": lambda t, x, v: x.__setitem__((slice(None), t.tensor([True, False, True])), v[1]),
    "[...] = v": lambda t, x, v: x.__setitem__(Ellipsis, v),
    "[:] = v.sum()": lambda t, x, v: x.__setitem__(slice(None), v.sum()),
    "index_put_": lambda t, x, v: x.index_put_((t.tensor([0, 1]), t.tensor([1, 2])), v[:2]),
    "index_put_ accumulate": lambda t, x, v: x.index_put_((t.tensor([0, 0]),), v, accumulate=True),
    "index_put_ accumulate mask": lambda t, x, v: x.index_put_((x.detach() < 0,), v[:2], accumulate=True),
    "masked_fill_": lambda t, x, v: x.masked_fill_(x.detach() > 0, 0.0),
    "masked_fill_ v.sum()": lambda t, x, v: x.masked_fill_(x.detach() > 0, v.sum()),
}

for _name, _write in _HISTORY.items():
    _history(_name, _write, create_graph=_name != "masked_fill_ v.sum()")  # see below

# Writes through a view with history: the view ops' nodes, then the write's node inside a CopySlices on the
# base, and the view's AsStridedBackward0; first- and second-order grads through all of them.
_THROUGH_VIEW: dict[str, Callable] = {
    "x[0] = 1": lambda t, x, v: x.__setitem__(0, 1.0),
    "x[0] = v": lambda t, x, v: x.__setitem__(0, v),
    "x[:, 0] = v[:2]": lambda t, x, v: x.__setitem__((slice(None), 0), v[:2]),
    "x[0, 1:] = v.sum()": lambda t, x, v: x.__setitem__((0, slice(1, None)), v.sum()),
    "x[None] = v": lambda t, x, v: x.__setitem__(None, v),
    "x[0, idx] = v[:2]": lambda t, x, v: x.__setitem__((0, t.tensor([0, 2])), v[:2]),
    "x[0:1] = v": lambda t, x, v: x.__setitem__(slice(0, 1), v),
    "x[..., 1] = 2": lambda t, x, v: x.__setitem__((Ellipsis, 1), 2.0),
    "x[1][mask] = 0": lambda t, x, v: x[1].__setitem__(x[1].detach() > 0, 0.0),
    "x[0].mul_(v)": lambda t, x, v: x[0].mul_(v),
    "x[1].add_(v, alpha=2)": lambda t, x, v: x[1].add_(v, alpha=2),
    "x[:, 1:].div_(3)": lambda t, x, v: x[:, 1:].div_(3.0),
    "x.t()[0].zero_()": lambda t, x, v: x.t()[0].zero_(),
    "x[0].fill_(v.sum())": lambda t, x, v: x[0].fill_(v.sum()),
    "x[1].copy_(v)": lambda t, x, v: x[1].copy_(v),
    "x.view(6)[2:4] += v[:2]": lambda t, x, v: x.view(6)[2:4].__iadd__(v[:2]),
    "x[0].masked_fill_(mask, v.sum())": lambda t, x, v: x[0].masked_fill_(x[0].detach() > 0, v.sum()),
    "x[1].index_put_(idx, v[:2])": lambda t, x, v: x[1].index_put_((t.tensor([2, 0]),), v[:2]),
}

for _name, _write in _THROUGH_VIEW.items():  # masked_fill_'s value grad: as for "masked_fill_ v.sum()" below
    _history(f"through a view {_name}", _write, create_graph="masked_fill_" not in _name)


@program("through a view: the view's grad_fn after the write")
def _view_after(t, p):
    a = p.leaf("a", A23)
    w = p.leaf("w", V3)
    x = a * 1.0
    row = x[0]
    other = x[1]
    row.mul_(w)
    p.counter("after the write")
    p.value("names", (x.grad_fn.name(), row.grad_fn.name(), row.grad_fn.next_functions[0][0] is x.grad_fn))
    p.value("versions", (x._version, row._version, other._version))
    p.counter("before reading the other view")
    p.value("other", other.grad_fn.name())  # regenerated now: one seq_nr
    p.counter("after reading it")
    p.watch(x, row, other)
    p.run("backward", lambda: (row * other).sum().backward())
    p.value("grads", (a.grad, w.grad))


@program("through a view: base written, then the view used")
def _base_then_view(t, p):
    a = p.leaf("a", A23)
    x = a * 2.0
    col = x[:, 2]
    x.add_(1.0)
    p.counter("base written")
    y = col * col
    p.counter("view used")
    p.watch(y)
    p.run("backward", lambda: y.sum().backward())
    p.value("a.grad", a.grad)


@program("through a view: refused cases")
def _view_refused(t, p):
    a = p.leaf("a", A23)
    x = a * 1.0
    p.run("view of a leaf", lambda: a[0].mul_(2.0))
    p.counter("view of a leaf")
    first, second = x.unbind()
    p.run("unbind output", lambda: first.mul_(2.0))
    p.run("split output", lambda: x.split(1)[0].add_(1.0))
    with t.no_grad():
        nv = x[0]
    p.value("no_grad view", (nv.requires_grad, nv.grad_fn is None, nv.is_leaf))
    p.run("no_grad view written", lambda: nv.mul_(2.0))
    with t.no_grad():
        nv2 = x[1]
    x.mul_(2.0)
    p.run("no_grad view read after the base was written", lambda: nv2.grad_fn)
    p.counter("end")


@program("history only v requires grad")
def _only_v(t, p):
    w = p.leaf("w", V3)
    x = p.const(A23)
    v = w * 2.0
    x[t.tensor([1])] = v
    p.watch(x)
    p.value("x", x)
    p.value("version", x._version)
    grads = p.run("grad", lambda: t.autograd.grad((x * x).sum(), [w]))
    p.value("grads", grads)


@program("history leaf refuses")
def _leaf(t, p):
    a = p.leaf("a", A23)
    for tag, write in (("mask", lambda: a.__setitem__(a > 0, 0)), ("masked_fill_", lambda: a.masked_fill_(a > 0, 0)),
                       ("index_put_", lambda: a.index_put_((t.tensor([0]),), t.tensor(1.0, dtype=a.dtype))),
                       ("int", lambda: a.__setitem__(0, 1.0)), ("...", lambda: a.__setitem__(..., 1.0))):
        p.run(tag, write)
        p.counter(tag)
    p.value("a", a)
    p.value("version", a._version)


@program("history saved value then write")
def _saved(t, p):
    a = p.leaf("a", A23)
    x = a * 1.5
    y = x.exp()  # saves its result; a later write to it is caught by backward
    y[y > 2] = 0
    p.watch(y)
    p.run("backward", lambda: y.sum().backward())
    # Not here: a saved *input* written by masked_fill_. torch's message then names the new grad_fn
    # ("output 0 of MaskedFill"), the engine's the old one ("output 0 of Mul") -- as for every in-place op.
