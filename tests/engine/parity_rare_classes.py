"""The rarer classes of divergence the differential fuzzer found over 16,000 programs (issue 30's list): one
program each, run on engine and torch by test_fuzz_classes_parity.py with parity_fuzz_classes.py's programs.

Each is `fn(t, p)` (see parity.py). The comments name what differs when the class comes back.
"""
from __future__ import annotations

import gc
import warnings
from typing import Callable

PROGRAMS: dict[str, Callable] = {}
KNOWN_GAPS: dict[str, Callable] = {}
"""Programs of classes the engine still gets wrong (tests/fuzz/FINDINGS.md says why): expected to fail until
fixed, then moved to PROGRAMS."""


def program(name: str, gap: bool = False):
    def register(fn: Callable) -> Callable:
        (KNOWN_GAPS if gap else PROGRAMS)[name] = fn
        return fn
    return register


@program("get_gradient_edge of a leaf makes a throwaway view_as node (one seq_nr), as does a custom Function's")
def _gradient_edge_seq_nr(t, p):
    x = p.leaf("x", [1.0, 2.0])
    p.counter("start")
    e = t.autograd.graph.get_gradient_edge(x)  # torch: x.view_as(x) under enable_grad, to reach the accumulator
    p.counter("leaf")
    with t.no_grad():
        t.autograd.graph.get_gradient_edge(x)
    p.counter("leaf under no_grad")
    y = x * 2
    e2 = t.autograd.graph.get_gradient_edge(y)
    p.counter("non-leaf")
    p.value("edges", (e.node.name(), e.output_nr, e2.node.name(), e2.output_nr))

    class Twice(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    z = Twice.apply(x)
    p.counter("custom Function")
    t.autograd.graph.get_gradient_edge(z)  # an ownership token: z.view_as(z)
    p.counter("custom Function's edge")
    g, = t.autograd.grad((y * z).sum(), [e])
    p.made("grad", g, (y + 1).sum())


@program("argmin and argmax of a 0-dim tensor with keepdim stay 0-dim")
def _arg_0dim_keepdim(t, p):
    x = t.tensor(0.25)
    for tag, f in (("argmin -1 keepdim", lambda: x.argmin(-1, keepdim=True)),
                   ("argmax 0 keepdim", lambda: x.argmax(0, True)),
                   ("argmin", lambda: x.argmin(0)), ("argmax no dim keepdim", lambda: x.argmax(keepdim=True)),
                   ("t.argmax", lambda: t.argmax(x, dim=0, keepdim=True)),
                   ("2-D, no dim, keepdim", lambda: t.ones(2, 3).argmax(keepdim=True))):
        r = p.run(tag, f)
        p.value(tag, None if r is None else (tuple(r.shape), r))


@program("clamp with tensor bounds: ClampBackward0 refuses a grad of the broadcast shape for a smaller self")
def _clamp_broadcast_backward(t, p):
    import itertools

    shapes = [(), (3,), (1,), (2, 3), (2, 1)]
    for i, (xs, los, his) in enumerate(itertools.product(shapes, repeat=3)):
        tag = f"x{xs} lo{los} hi{his}"
        needed = (True, True, True) if i % 2 == 0 else ((True, False, False), (False, True, True))[i % 4 // 2]
        x = t.full(xs, 1.0, dtype=t.float64, requires_grad=needed[0])
        lo = t.full(los, 0.5, dtype=t.float64, requires_grad=needed[1])
        hi = t.full(his, 2.0, dtype=t.float64, requires_grad=needed[2])
        y = x.clamp(lo, hi)
        p.run(tag, lambda y=y: y.sum().backward())
        p.value(tag + " grads", (x.grad, lo.grad, hi.grad))


@program("indexing a 0-dim tensor: out of bounds for any index but 0")
def _index_0dim(t, p):
    z = p.leaf("z", 0.25)
    for i in (0, 1, -1, 2, -2):
        p.run(f"[{i}]", lambda i=i: z[i])
    p.run("[0, 0]", lambda: z[0, 0])
    p.counter("end")


@program("masked assignment of a 0-dim tensor of another dtype casts it")
def _setitem_mask_dtype(t, p):
    x = p.leaf("x", [1.0, -1.0, 0.5], requires_grad=False)
    x[x > -.5] = t.tensor(.09)
    p.made("float32 value", x)
    y = p.leaf("y", [1.0, -1.0], dtype="float32", requires_grad=False)
    y[y < 0] = t.tensor(2.5, dtype=t.float64)
    p.made("float64 value", y)
    w = p.leaf("w", [1.0, -1.0, 2.0])
    h = w * 1
    h[h > 0] = t.tensor(3.0)
    p.watch(h)
    p.made("with history", h)
    v = p.leaf("v", 3.0, dtype="float32")
    h2 = w * 1
    h2[h2 > 0] = v
    h2.sum().backward()
    p.made("float32 value with history", h2, v.grad)
    cases = {"index_put_ of a mask": lambda x: x.index_put_((x > 0,), t.tensor(.5)),
             "one element of a view": lambda x: x.__setitem__(x > 0, t.tensor([.5, .6])[1:]),
             "an int and a mask": lambda x: x.unsqueeze(0).__setitem__((0, x > 0), t.tensor(.5)),
             "an index and a mask": lambda x: x.unsqueeze(0).__setitem__((t.tensor([0]), x > 0), t.tensor(.5)),
             "two values": lambda x: x.__setitem__(x > 0, t.tensor([.5, .6])),
             "index_put_ accumulate": lambda x: x.index_put_((x > 0,), t.tensor(.5), accumulate=True)}
    for tag, f in cases.items():
        x = p.leaf("x " + tag, [1.0, -1.0, 0.5], requires_grad=False)
        p.run(tag, lambda f=f, x=x: f(x))
        p.made(tag, x)


@program("a backward that raised frees its graph: an unreachable leaf of a later grad gets Identity")
def _raised_backward_frees(t, p):
    x = p.leaf("x", [1.0, 2.0])
    x.register_post_accumulate_grad_hook(lambda v: 5)
    gc.disable()
    try:
        p.run("backward", lambda: (x * 2).sum().backward())
    finally:
        gc.enable()  # raises: the hook returned a value
    z = p.leaf("z", [1.0])
    w = (z * 3).sum()
    p.counter("before")
    gc.disable()  # the engine must free the graph without the cycle collector
    try:
        g = t.autograd.grad(w, [z, x], allow_unused=True)  # torch: x's AccumulateGrad is gone, so Identity
    finally:
        gc.enable()
    p.counter("after")
    p.made("grads", *[v for v in g if v is not None])


@program("softmax of a 0-dim tensor passes a nan grad on")
def _softmax_0dim_nan(t, p):
    for tag, f in (("softmax", lambda x: x.softmax(0)), ("log_softmax", lambda x: x.log_softmax(-1))):
        for g in (float("nan"), 2.0, float("inf")):
            x = p.leaf(f"x {tag} {g}", 1.0)
            f(x).backward(t.tensor(g, dtype=t.float64))
            p.value(f"{tag} {g}", x.grad)


@program("masked_fill_ with a 1-dim value tensor makes its node before refusing")
def _masked_fill_value_dim(t, p):
    h = p.leaf("h", [1.0, -1.0]) * 1
    p.counter("start")
    p.run("masked_fill_", lambda: h.masked_fill_(h < 0, t.tensor([.5], dtype=t.float64)))
    p.counter("after")
    p.run("masked_fill", lambda: h.masked_fill(h < 0, t.tensor([.5], dtype=t.float64)))
    p.counter("out of place")
    c = p.const([1.0, -1.0])
    p.run("masked_fill_ without history", lambda: c.masked_fill_(c < 0, t.tensor([.5], dtype=t.float64)))
    m3, m22 = t.tensor([True, False, True]), t.tensor([[True, False], [False, True]])
    one = lambda *s: t.ones(*s, dtype=t.float64)  # noqa: E731
    cases = {"mask (3,), number": lambda f: f(m3, 1.0), "mask (3,), 0-dim": lambda f: f(m3, one()),
             "mask (3,), (1,)": lambda f: f(m3, one(1)), "mask (2, 2), (1,)": lambda f: f(m22, one(1)),
             "mask (2, 2), 0-dim": lambda f: f(m22, one()), "float mask": lambda f: f(t.ones(2), one(1)),
             "float mask, number": lambda f: f(t.ones(2), 1.0)}
    for tag, case in cases.items():
        p.run(tag + " in place", lambda case=case: case(h.masked_fill_))
        p.counter(tag + " in place")
        p.run(tag, lambda case=case: case(h.masked_fill))
        p.counter(tag)
    p.made("end", h, (h * 2).sum())


@program("sgn of a p-norm (p not 1, 2 or inf): the ZeroTensor grad reaches the norm's formula, which refuses it")
def _norm_sgn_zero_tensor(t, p):
    for pn in (3, 1.5, 2, 1, float("inf"), 0.5):
        for kw in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}):
            x = p.leaf(f"x p={pn} {kw}", [[1.0, -2.0], [0.5, 3.0]])
            p.run(f"p={pn} {kw}", lambda x=x, pn=pn, kw=kw: x.norm(pn, **kw).sgn().sum().backward())
            p.value(f"p={pn} {kw} grad", x.grad)
            y = p.leaf(f"y p={pn} {kw}", [[1.0, -2.0], [0.5, 3.0]])
            p.run(f"linalg.vector_norm p={pn} {kw}",
                  lambda y=y, pn=pn, kw=kw: t.linalg.vector_norm(y, pn, **kw).sgn().sum().backward())
            p.value(f"linalg.vector_norm p={pn} {kw} grad", y.grad)


@program("backward of several roots: a grad that does not fit root 1 gets the broadcast error")
def _multi_root_grad_shapes(t, p):
    a = p.leaf("a", [[1.0, 2.0], [3.0, 4.0]]) * 1
    c = p.leaf("c", [[1.0, 2.0], [3.0, 4.0]]) * 1
    o = t.ones
    cases = {"index 1 (2, 3)": lambda: t.autograd.backward([a, c], grad_tensors=[o(2, 2), o(2, 3)]),
             "index 0 (2, 3)": lambda: t.autograd.backward([a, c], grad_tensors=[o(2, 3), o(2, 3)]),
             "grad, index 1 (3, 2)": lambda: t.autograd.grad([a, c], [a], grad_outputs=[o(2, 2), o(3, 2)]),
             "index 1 (1, 2)": lambda: t.autograd.backward([a, c], grad_tensors=[o(2, 2), o(1, 2)]),
             "index 1 (2,)": lambda: t.autograd.backward([a, c], grad_tensors=[o(2, 2), o(2)]),
             "index 1 (3, 2, 2)": lambda: t.autograd.backward([a, c], grad_tensors=[o(2, 2), o(3, 2, 2)]),
             "index 2 0-dim root": lambda: t.autograd.backward([a, c, a.sum()], grad_tensors=[o(2, 2), o(2, 2), o(2)]),
             "x == y of shapes that do not broadcast": lambda: a == o(3, 2)}
    for tag, f in cases.items():
        p.run(tag, f)
    p.counter("end")


@program("requires_grad_() of a no_grad view whose base was written in place")
def _requires_grad_stale_view(t, p):
    x = p.leaf("x", [1.0, 2.0, 3.0], requires_grad=False)
    with t.no_grad():
        v = x[1:]
    x.mul_(2)
    p.run("requires_grad_", lambda: v.requires_grad_())
    p.made("v", v, x)
    y = (v * 2).sum()
    y.backward()
    p.made("grad", v.grad)
    for case in range(6):  # base with history or not, written with grad mode on or off
        w = p.leaf(f"w {case}", [1.0, 2.0, 3.0], requires_grad=case % 2 == 0)
        b = w * 1 if case < 4 else p.const([1.0, 2.0, 3.0])
        with t.no_grad():
            u = b[1:]
        if case in (0, 1, 4):
            b.mul_(2)
        else:
            with t.no_grad():
                b.mul_(2)
        r = p.run(f"case {case} requires_grad_", lambda u=u: u.requires_grad_())
        p.run(f"case {case} requires_grad_(False)", lambda u=u: u.requires_grad_(False))
        if r is not None:
            p.value(f"case {case}", (u.requires_grad, u.detach()))
            p.run(f"case {case} is_leaf", lambda u=u: u.is_leaf)


@program("nll_loss and cross_entropy of (N, C, d...) inputs: torch's checks and messages")
def _nll_loss_spatial(t, p):
    F = t.nn.functional
    ones = lambda *s: t.ones(*s, dtype=t.float64, requires_grad=True)  # noqa: E731
    cases = {"nll (2,3,1) target [2]": lambda: F.nll_loss(ones(2, 3, 1), t.tensor([1, 1])),
             "nll (2,3,1,1) target [2]": lambda: F.nll_loss(ones(2, 3, 1, 1), t.tensor([1, 1])),
             "cross_entropy (2,3,1) target [2]": lambda: F.cross_entropy(ones(2, 3, 1), t.tensor([1, 1])),
             "nll (3,1) target [2]": lambda: F.nll_loss(ones(3, 1), t.tensor([1, 1])),
             "nll (2,3,1) target [3,1]": lambda: F.nll_loss(ones(2, 3, 1), t.tensor([[1], [1], [0]]))}
    for tag, f in cases.items():
        p.run(tag, f)
        p.counter(tag)


@program("reshape checks the size before a stale view regenerates; view regenerates first")
def _reshape_stale_view(t, p):
    for tag, mk in (("t", lambda h: h.t()), ("expand", lambda h: h[0].expand(2, 3)), ("slice", lambda h: h[:, 1:]),
                    ("row, contiguous", lambda h: h[1])):
        x = p.leaf("x " + tag, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        h = x * 1
        v = mk(h)
        h.mul_(2)
        p.run(tag + " reshape(7)", lambda v=v: v.reshape(7))
        p.counter(tag + " reshape(7)")
        p.run(tag + " reshape(-1, -1)", lambda v=v: v.reshape(-1, -1))
        p.counter(tag + " reshape(-1, -1)")
        p.run(tag + " view(7)", lambda v=v: v.view(7))
        p.counter(tag + " view(7)")
        p.made(tag + " reshape(-1)", v.reshape(-1))
    w = p.leaf("w", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    u = w.t()
    with t.no_grad():
        w.mul_(2)
    p.run("leaf's view reshape(7)", lambda: u.reshape(7))
    p.counter("leaf's view reshape(7)")
    p.made("leaf's view reshape(-1)", u.reshape(-1))


@program("cross_entropy and nll_loss of a 0-dim target: torch's batch-size ValueError")
def _cross_entropy_0dim_target(t, p):
    F = t.nn.functional
    ones = lambda *s: t.ones(*s, dtype=t.float64, requires_grad=True)  # noqa: E731
    cases = {"ce (1, 2)": lambda: F.cross_entropy(ones(1, 2), t.tensor(1)),
             "nll (1, 2)": lambda: F.nll_loss(ones(1, 2), t.tensor(1)),
             "ce (2,)": lambda: F.cross_entropy(ones(2), t.tensor(1)),
             "ce (3, 2)": lambda: F.cross_entropy(ones(3, 2), t.tensor(1)),
             "ce (2,) target [1]": lambda: F.cross_entropy(ones(2), t.tensor([1]))}
    for tag, f in cases.items():
        r = p.run(tag, f)
        p.counter(tag)
        if r is not None:
            p.made(tag, r)


@program("var and std of a 0-dim tensor under create_graph: torch's formulas' nodes")
def _var_0dim_create_graph(t, p):
    for fn in ("var", "std"):
        for data in (1.5, [1.5], [1.5, 2.0], [[1.5, 2.0]]):
            for kw in ({}, {"dim": 0}, {"correction": 2}, {"dim": 0, "correction": 3}, {"dim": -1, "correction": 0}):
                tag = f"{fn} {data} {kw}"
                x = p.leaf("x " + tag, data)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # degrees of freedom <= 0
                    y = getattr(x, fn)(**kw)
                for create_graph in (False, True):
                    g, = t.autograd.grad(y, [x], t.ones_like(y), create_graph=create_graph, retain_graph=True)
                    p.watch(g)
                    p.made(f"{tag} create_graph={create_graph}", g, y)


@program("addmm's argument checks: mat1, mat2 and the bias's expand, in torch's order and words")
def _addmm_checks(t, p):
    o = lambda *s: t.ones(*s, dtype=t.float64)  # noqa: E731
    cases = {"mat2 3-D": lambda: t.addmm(o(3, 2), o(3, 2), o(1, 3, 2)),
             "mat1 3-D": lambda: t.addmm(o(3, 2), o(1, 3, 2), o(2, 2)),
             "both 3-D": lambda: t.addmm(o(3, 2), o(1, 3, 2), o(1, 2, 2)),
             "mat2 1-D": lambda: t.addmm(o(3, 2), o(3, 2), o(2)),
             "bias (4, 5)": lambda: t.addmm(o(4, 5), o(3, 2), o(2, 2)),
             "bias (3,)": lambda: t.addmm(o(3), o(3, 2), o(2, 2)),
             "bias (2, 1, 2)": lambda: t.addmm(o(2, 1, 2), o(3, 2), o(2, 2)),
             "shapes": lambda: t.addmm(o(3, 2), o(3, 2), o(3, 2))}
    for tag, f in cases.items():
        p.run(tag, f)
        p.counter(tag)


@program("a node that saved its output is freed with its last tensor: backward(inputs=) then needs Identity")
def _saved_output_node_freed(t, p):
    class Exp(t.autograd.Function):  # save_for_backward(out): the same cycle through ctx
        @staticmethod
        def forward(ctx, v):
            out = v.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return g * out

    for tag, f in (("exp", lambda v: v.exp()), ("tanh", lambda v: v.tanh()), ("sigmoid", lambda v: v.sigmoid()),
                   ("softmax", lambda v: v.softmax(0)), ("pow", lambda v: v ** 2.5), ("relu", lambda v: v.relu()),
                   ("custom Function", Exp.apply)):
        a = p.leaf("a " + tag, [1.0, 2.0])
        b = p.leaf("b " + tag, [3.0, 4.0])
        y = f(a * 2)
        del y  # torch frees the nodes (and a's AccumulateGrad) here
        gc.disable()  # the engine must free them without the cycle collector
        try:
            s = (b * 3).sum()
            p.counter(tag + " before")
            s.backward(inputs=[a, b])
            p.counter(tag + " after")
        finally:
            gc.enable()
        p.made(tag, b.grad)


@program("a saved output is read back with its node as grad_fn, and double backward goes through it")
def _saved_output_read_back(t, p):
    class Exp(t.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            out = v.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            p.value("unpacked in backward", (out.grad_fn is ctx, out.requires_grad))
            return g * out

    x = p.leaf("x", [0.5, -1.0, 2.0])
    for tag, f in (("exp", lambda v: v.exp()), ("tanh", lambda v: v.tanh()), ("sigmoid", lambda v: v.sigmoid()),
                   ("custom Function", Exp.apply)):
        y = f(x * 1.5)
        r = y.grad_fn._saved_result if tag != "custom Function" else y.grad_fn.saved_tensors[0]
        p.value(tag + " read", (r is y, r.grad_fn is y.grad_fn, r.requires_grad, r._version, r.is_leaf, r))
        g, = t.autograd.grad(y.sum(), [x], create_graph=True)
        p.watch(g, tag=tag + " grad graph")
        p.run(tag + " second order", lambda g=g, tag=tag: p.value(tag + " gg", t.autograd.grad(g.sum(), [x])))
        y2 = f(x * 0.5)
        y2.add_(1)
        with p.attempt(tag + " modified output"):
            y2.sum().backward()
