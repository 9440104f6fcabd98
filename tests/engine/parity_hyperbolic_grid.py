"""sinh, cosh and meshgrid, which d2l's library binds at import (`sinh = torch.sinh`, `meshgrid = torch.meshgrid`),
as programs run on the engine and on torch by test_hyperbolic_grid_parity.py. Each is `fn(t, p)`; see parity.py."""
from __future__ import annotations

import warnings

from tests.engine.parity import registry

PROGRAMS, program = registry()


@program("sinh and cosh: SinhBackward0 and CoshBackward0, their formulas, integer input, 0-dim")
def _sinh_cosh(t, p):
    x = p.leaf("x", [[-1.5, 0.0, 0.25], [2.0, -0.5, 3.0]])
    for tag, y in (("sinh", t.sinh(x)), ("cosh", x.cosh()), ("both", (x.sinh() * t.cosh(x * 2)).sum())):
        p.watch(y, tag=tag)
        gs = t.autograd.grad(y.sum(), [x], create_graph=True)
        p.value(tag + " grad", gs[0])
        p.watch(gs[0], tag=tag + " grad graph", hooks=False)
    p.value("float32", (t.tensor([0.5, -2.0]).sinh(), t.tensor([0.5, -2.0]).cosh()))
    p.value("int", (t.sinh(t.tensor([1, 2])), t.cosh(t.tensor(3))))
    p.value("0-dim", t.tensor(0.75, dtype=t.float64).sinh())
    p.counter("end")


@program("meshgrid: ij and xy, a list or separate tensors, 0-dim, grads through View and Expand")
def _meshgrid(t, p):
    a = p.leaf("a", [1.0, 2.0, 3.0])
    b = p.leaf("b", [4.0, 5.0])
    for tag, kw in (("ij", {"indexing": "ij"}), ("xy", {"indexing": "xy"})):
        ga, gb = t.meshgrid(a, b, **kw)
        p.value(tag, (ga, gb))
        p.watch(ga, gb, tag=tag)
        (ga * gb).sum().backward()
        p.value(tag + " grads", (a.grad, b.grad))
        a.grad = b.grad = None
    with warnings.catch_warnings():  # torch warns once a process (TORCH_WARN_ONCE), so the warning is not compared
        warnings.simplefilter("ignore")
        p.value("no indexing: a list, ij", t.meshgrid([a, b]))
    c = t.tensor(7.0, dtype=a.dtype)
    p.value("three, one 0-dim, xy", t.meshgrid(a, c, b, indexing="xy"))
    p.value("one tensor xy", t.meshgrid(b, indexing="xy"))
    try:  # the message ends with the tensor as C++ prints it, which the engine prints as Python does
        t.meshgrid(a, t.ones(2, 2, dtype=a.dtype), indexing="ij")
    except RuntimeError as e:
        p.value("2-D", str(e).split(" but got:")[0])
    p.run("dtypes", lambda: t.meshgrid(a, t.tensor([1, 2]), indexing="ij"))
    p.run("indexing", lambda: t.meshgrid(a, b, indexing="yx"))
    p.run("empty", lambda: t.meshgrid([], indexing="ij"))
    p.counter("end")
