"""Ops real programs use (issue 30's list): log10, tril/triu, flip, roll, topk, one_hot, Tensor.type, the losses
smooth_l1/huber/binary_cross_entropy, and the random ops multinomial, normal and normal_, as programs run on
the engine and on torch by test_ops_parity.py.

Each is `fn(t, p)` (see parity.py). The random ops' values are the engine's own: their programs record shapes,
dtypes, nodes and seq_nrs, and values only where they do not depend on the draw.
"""
from __future__ import annotations

import warnings

from tests.engine.parity import registry

PROGRAMS, program = registry()


def _grad_graph(t, p, tag, y, *inputs):
    """Watch `y`, take its create_graph grads with respect to `inputs` and watch those (the formulas' nodes)."""
    p.watch(y, tag=tag)
    p.counter(tag)
    gs = t.autograd.grad(y.sum(), list(inputs), create_graph=True, allow_unused=True)
    p.counter(tag + " grad")
    for g in gs:
        p.value(tag + " grad", g)
        if g is not None and g.grad_fn is not None:
            p.watch(g, tag=tag + " grad graph", hooks=False)


@program("log10: Log10Backward0 and its formula; integer input gives float")
def _log10(t, p):
    x = p.leaf("x", [[1.0, 10.0], [0.5, 100.0]])
    _grad_graph(t, p, "log10", x.log10(), x)
    _grad_graph(t, p, "torch.log10", t.log10(x * 2), x)
    r = t.tensor([1, 10, 1000]).log10()
    p.value("long", (str(r.dtype), r))
    p.value("float32", t.tensor([0.0, -1.0, 2.0]).log10())


@program("tril and triu: diagonals, batches, in place, errors")
def _tril_triu(t, p):
    x = p.leaf("x", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for tag, f in (("tril", lambda: t.tril(x)), ("triu", lambda: x.triu()), ("tril 1", lambda: x.tril(1)),
                   ("triu -1", lambda: t.triu(x, diagonal=-1)), ("tril -5", lambda: x.tril(-5)),
                   ("triu 7", lambda: x.triu(7))):
        _grad_graph(t, p, tag, f() * x, x)
    b = p.leaf("b", [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    _grad_graph(t, p, "batched", b.tril(), b)
    h = b * 1
    p.run("tril_", lambda: h.tril_())
    p.made("tril_", h)
    p.watch(h, tag="tril_ graph")
    p.run("triu_", lambda: h.triu_(1))
    p.made("triu_", h)
    m = t.ones(3, 3, dtype=t.bool)
    p.value("bool", t.tril(m))
    p.value("long", t.triu(t.ones(2, 3, dtype=t.long)))
    for tag, f in (("1-D", lambda: t.tril(t.ones(3))), ("0-D", lambda: t.tensor(1.0).triu()),
                   ("1-D in place", lambda: t.ones(3).tril_())):
        p.run(tag, f)
    p.counter("errors")


@program("roll: flattened, one dim, several dims, negative shifts and dims; saved attributes; errors")
def _roll(t, p):
    x = p.leaf("x", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    _grad_graph(t, p, "roll flat", t.roll(x, 1) * x, x)
    _grad_graph(t, p, "roll dim", x.roll(2, 1) * x, x)
    _grad_graph(t, p, "roll dims", x.roll((1, -1), (0, -1)) * x, x)
    _grad_graph(t, p, "roll keywords", t.roll(x, shifts=[-4], dims=[0]) * x, x)
    y = x.roll((1, -1), (0, -1))
    p.value("saved", (y.grad_fn._saved_shifts, y.grad_fn._saved_dims))
    p.value("0-dim", t.roll(t.tensor(2.0), 1))
    p.value("long", t.arange(5).roll(-2))
    for tag, f in (("shifts without dims", lambda: x.roll((1, 2))), ("misaligned", lambda: x.roll((1, 2), (0,))),
                   ("out of range", lambda: x.roll(1, 5))):
        p.run(tag, f)
    p.counter("errors")


@program("flip: dims as a tuple, list or ints; negative dims; errors")
def _flip(t, p):
    x = p.leaf("x", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    _grad_graph(t, p, "flip 0", x.flip(0) * x, x)
    _grad_graph(t, p, "flip (0, 1)", t.flip(x, (0, 1)) * x, x)
    _grad_graph(t, p, "flip [-1]", t.flip(x, dims=[-1]) * x, x)
    _grad_graph(t, p, "flip 1, 0", x.flip(1, 0) * x, x)
    _grad_graph(t, p, "flip ()", x.flip(()) * x, x)
    p.value("fliplr", x.fliplr())
    p.value("flipud", x.flipud())
    p.value("0-dim", t.tensor(2.0).flip(0))
    for tag, f in (("out of range", lambda: x.flip(2)), ("twice", lambda: x.flip(0, 0)),
                   ("twice, wrapped", lambda: x.flip(1, -1)), ("fliplr 1-D", lambda: t.ones(3).fliplr())):
        p.run(tag, f)
    p.counter("errors")


@program("topk: values with TopkBackward0, int64 indices, ties, NaN, largest=False, dim, errors")
def _topk(t, p):
    x = p.leaf("x", [[3.0, 1.0, 3.0, 2.0], [0.5, 4.0, -1.0, 4.0]])
    r = x.topk(2)
    p.value("result", (type(r).__name__, len(r), isinstance(r, tuple)))
    p.value("values", r.values)
    p.value("indices", (str(r.indices.dtype), r.indices))
    _grad_graph(t, p, "topk", r[0] * 2, x)
    v, i = t.topk(x, 1, dim=0, largest=False)
    p.value("smallest along 0", (v, i))
    _grad_graph(t, p, "smallest", v, x)
    v, i = x.topk(k=3, dim=-1, largest=True, sorted=True)
    _grad_graph(t, p, "k=3", v, x)
    p.value("k=3 indices", i)
    n = t.tensor([1.0, float("nan"), 3.0, -2.0])
    p.value("nan largest", n.topk(2))
    p.value("nan smallest", n.topk(2, largest=False))
    s = p.leaf("s", 5.0)
    for k in (0, 1):
        v, i = s.topk(k)
        p.value(f"0-dim k={k}", (v, i))
    _grad_graph(t, p, "0-dim", s.topk(1)[0], s)
    p.value("k=0", x.topk(0))
    ties = p.leaf("ties", [[float(v % 3) for v in range(i, i + 20)] for i in range(3)])
    for k, largest, srt in ((1, True, True), (5, True, True), (7, False, True), (4, True, False), (20, False, False)):
        v, i = ties.topk(k, largest=largest, sorted=srt)
        p.value(f"ties k={k} largest={largest} sorted={srt}", (v, i))
    v, i = ties.topk(2, dim=0)
    p.value("ties along 0", i)
    _grad_graph(t, p, "ties grad", ties.topk(6)[0], ties)
    wide = t.tensor([float(v % 4) for v in range(130)] + [float("nan")] * 2)
    p.value("partial_sort path", (wide.topk(2), wide.topk(2, largest=False)))
    p.value("nan ties", t.tensor([float("nan"), 1.0, float("nan"), 1.0]).topk(3))
    p.value("long", t.tensor([3, 1, 2]).topk(2))
    for tag, f in (("k too big", lambda: x.topk(5)), ("k negative", lambda: x.topk(-1)),
                   ("0-dim k=2", lambda: s.topk(2)), ("dim out of range", lambda: x.topk(1, dim=2))):
        p.run(tag, f)
    p.counter("errors")


@program("one_hot: int64 rows, num_classes inferred or given, errors")
def _one_hot(t, p):
    F = t.nn.functional
    idx = t.tensor([0, 2, 1])
    p.value("inferred", (str(F.one_hot(idx).dtype), F.one_hot(idx)))
    p.value("given", F.one_hot(idx, 5))
    p.value("keyword", F.one_hot(idx, num_classes=4))
    p.value("0-dim", F.one_hot(t.tensor(1), 3))
    p.value("2-D", F.one_hot(t.tensor([[0, 1], [1, 1]]), 3))
    p.value("empty, given", F.one_hot(t.tensor([], dtype=t.long), 3))
    p.value("-1", F.one_hot(idx, -1))
    for tag, f in (("float", lambda: F.one_hot(t.tensor([0.0, 1.0]))),
                   ("int32", lambda: F.one_hot(t.tensor([0, 1], dtype=t.int32), 3)),
                   ("too large", lambda: F.one_hot(t.tensor([0, 3]), 3)),
                   ("negative", lambda: F.one_hot(t.tensor([0, -1]), 3)),
                   ("empty, inferred", lambda: F.one_hot(t.tensor([], dtype=t.long))),
                   ("zero classes", lambda: F.one_hot(idx, 0))):
        p.run(tag, f)


@program("Tensor.type: a name without arguments; dtypes, names and tensor types cast (ToCopyBackward0)")
def _tensor_type(t, p):
    x = p.leaf("x", [1.5, -2.0], dtype="float32")
    p.value("names", tuple(y.type() for y in (x, t.ones(1, dtype=t.float64), t.ones(1, dtype=t.long),
                                             t.ones(1, dtype=t.int32), t.ones(1, dtype=t.bool))))
    p.counter("names")
    for tag, arg in (("float64", t.float64), ("'torch.DoubleTensor'", "torch.DoubleTensor"),
                     ("DoubleTensor", t.DoubleTensor), ("LongTensor", t.LongTensor),
                     ("'torch.LongTensor'", "torch.LongTensor"), ("int64", t.int64),
                     ("'torch.IntTensor'", "torch.IntTensor"), ("'torch.BoolTensor'", "torch.BoolTensor")):
        y = x.type(arg)
        p.made(tag, y)
        p.value(tag + " is x", y is x)
    same = x.type(t.float32)
    p.value("same dtype is x", same is x)
    p.value("same name is x", x.type("torch.FloatTensor") is x)
    y = x.type(dtype=t.float64, non_blocking=True)
    p.watch(y, tag="keyword")
    for tag, arg in (("'float'", "float"), ("'torch.float64'", "torch.float64"), ("'foo'", "foo")):
        p.run(tag, lambda arg=arg: x.type(arg))
    p.counter("errors")


def _quiet(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f()


@program("smooth_l1_loss and huber_loss: beta/delta, reductions, formulas' nodes, beta=0, broadcasting, errors")
def _smooth_l1(t, p):
    F = t.nn.functional
    x = p.leaf("x", [[0.2, 1.5], [-3.0, 0.9]])
    y = p.const([[0.0, 1.0], [1.0, 0.0]])
    for tag, kw in (("mean", {}), ("sum", {"reduction": "sum"}), ("none", {"reduction": "none"}),
                    ("beta .5", {"beta": 0.5}), ("beta 0", {"beta": 0.0}), ("beta 3 sum", {"beta": 3.0,
                                                                                         "reduction": "sum"})):
        _grad_graph(t, p, "smooth_l1 " + tag, F.smooth_l1_loss(x, y, **kw), x)
    for tag, kw in (("mean", {}), ("delta .5 sum", {"delta": 0.5, "reduction": "sum"}),
                    ("none", {"reduction": "none"})):
        _grad_graph(t, p, "huber " + tag, F.huber_loss(x, y, **kw), x)
    yt = p.leaf("yt", [[0.0, 1.0], [1.0, 0.0]])
    _grad_graph(t, p, "target grad", F.smooth_l1_loss(x, yt), x, yt)
    _grad_graph(t, p, "huber target grad", F.huber_loss(x, yt), x, yt)
    _grad_graph(t, p, "broadcast", _quiet(lambda: F.smooth_l1_loss(x, y[0])), x)
    for tag, f in (("smooth_l1", F.smooth_l1_loss), ("huber", F.huber_loss)):
        g, = t.autograd.grad(f(x, yt, reduction="sum"), [x], create_graph=True)
        p.value(tag + " second order", t.autograd.grad((g * g).sum(), [x, yt]))
    p.value("modules", (t.nn.SmoothL1Loss(beta=2.0)(x, y), t.nn.HuberLoss(delta=0.5, reduction="sum")(x, y)))
    p.value("float32 with float64", F.smooth_l1_loss(x.float(), y))
    for tag, f in (("negative beta", lambda: F.smooth_l1_loss(x, y, beta=-1.0)),
                   ("negative delta", lambda: F.huber_loss(x, y, delta=-1.0)),
                   ("bad reduction", lambda: F.smooth_l1_loss(x, y, reduction="avg"))):
        p.run(tag, f)
    p.counter("errors")


@program("binary_cross_entropy: reductions, weight, its formulas' nodes, clamped log, target grad, errors")
def _bce(t, p):
    F = t.nn.functional
    x = p.leaf("x", [[0.2, 0.5], [0.999, 1.0]])
    y = p.const([[0.0, 1.0], [1.0, 0.0]])
    w = p.const([1.0, 2.0])
    for tag, kw in (("mean", {}), ("sum", {"reduction": "sum"}), ("none", {"reduction": "none"}),
                    ("weight", {"weight": w})):
        _grad_graph(t, p, "bce " + tag, F.binary_cross_entropy(x, y, **kw), x)
    yt = p.leaf("yt", [[0.0, 1.0], [0.5, 0.25]])
    _grad_graph(t, p, "target grad", F.binary_cross_entropy(x, yt), x, yt)
    g, = t.autograd.grad(F.binary_cross_entropy(x[0], yt[1], weight=w), [x], create_graph=True)
    p.value("second order", t.autograd.grad((g * g).sum(), [x, yt]))
    p.value("module", t.nn.BCELoss(weight=w)(x, y))
    z = p.leaf("z", [0.0, 1.0])
    loss = F.binary_cross_entropy(z, p.const([1.0, 0.0]))
    p.value("log clamped at -100", loss)
    loss.backward()
    p.value("grad at 0 and 1", z.grad)
    for tag, f in (("outside [0, 1]", lambda: F.binary_cross_entropy(p.const([1.5]), p.const([1.0]))),
                   ("target size", lambda: F.binary_cross_entropy(p.const([0.5]), p.const([1.0, 0.0]))),
                   ("dtypes", lambda: F.binary_cross_entropy(p.const([0.5], "float32"), p.const([1.0]))),
                   ("weight size", lambda: F.binary_cross_entropy(p.const([0.5, 0.1]), p.const([1.0, 0.0]),
                                                                  weight=p.const([1.0, 2.0, 3.0])))):
        p.run(tag, f)
    p.counter("errors")


@program("multinomial: int64 samples of the right shape, no node, with and without replacement, errors")
def _multinomial(t, p):
    t.manual_seed(0)
    probs = p.leaf("probs", [0.1, 0.2, 0.7])
    r = t.multinomial(probs, 2)
    p.value("1-D", (tuple(r.shape), str(r.dtype), r.requires_grad, r.grad_fn is None))
    p.value("distinct", len(set(r.tolist())) == 2)
    rows = t.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    r = rows.multinomial(4, replacement=True)
    p.value("certain rows", r)
    r = t.multinomial(rows, 1, True, generator=t.Generator().manual_seed(3))
    p.value("generator", r)
    p.value("all without replacement", sorted(t.multinomial(t.tensor([1.0, 2.0, 3.0]), 3).tolist()))
    p.value("zero rows", t.multinomial(t.ones(0, 3), 1))
    p.counter("samples")
    for tag, f in (("too many", lambda: t.multinomial(probs, 4)),
                   ("negative", lambda: t.multinomial(t.tensor([-1.0, 1.0]), 1)),
                   ("zero sum", lambda: t.multinomial(t.tensor([0.0, 0.0]), 1)),
                   ("nan", lambda: t.multinomial(t.tensor([float("nan"), 1.0]), 1)),
                   ("inf", lambda: t.multinomial(t.tensor([float("inf"), 1.0]), 1)),
                   ("3-D", lambda: t.multinomial(t.ones(2, 2, 2), 1)),
                   ("0-D", lambda: t.multinomial(t.tensor(1.0), 1)),
                   ("long", lambda: t.multinomial(t.tensor([1, 2]), 1)),
                   ("zero samples", lambda: t.multinomial(probs, 0)),
                   ("empty categories", lambda: t.multinomial(t.ones(2, 0), 1))):
        p.run(tag, f)
    p.counter("errors")
    t.manual_seed(5)
    a = t.multinomial(t.tensor([0.3, 0.3, 0.4]), 8, replacement=True)
    t.manual_seed(5)
    b = t.multinomial(t.tensor([0.3, 0.3, 0.4]), 8, replacement=True)
    p.value("repeats under manual_seed", t.equal(a, b))


@program("normal: the four overloads, NormalBackward1/2/3 (zero grads), dtypes, sizes, errors")
def _normal(t, p):
    t.manual_seed(0)
    m = p.leaf("m", [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    sd = p.leaf("sd", [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    for tag, f, inputs in (("tensor, tensor", lambda: t.normal(m, sd), (m, sd)),
                           ("tensor, float", lambda: t.normal(m, 0.5), (m,)),
                           ("tensor", lambda: t.normal(m), (m,)),
                           ("float, tensor", lambda: t.normal(1.0, sd), (sd,))):
        r = f()
        p.value(tag, (tuple(r.shape), str(r.dtype), r.requires_grad))
        p.watch(r, tag=tag)
        gs = t.autograd.grad(r.sum(), list(inputs))
        p.value(tag + " grads", gs)
    r = t.normal(0.0, 1.0, (2, 3))
    p.made("float, float, size", r.abs() * 0)
    r = t.normal(2, 3, size=(4,), dtype=t.float64, requires_grad=True)
    p.value("dtype and requires_grad", (tuple(r.shape), str(r.dtype), r.requires_grad, r.is_leaf))
    r = t.normal(t.zeros(3), t.ones(2, 3))
    p.value("broadcast", tuple(r.shape))
    r = t.normal(t.zeros(3), 0.0)
    p.value("std 0", r)
    r = t.normal(m, 1.0, generator=t.Generator().manual_seed(1))
    p.value("generator", tuple(r.shape))
    p.counter("draws")
    for tag, f in (("negative std", lambda: t.normal(t.zeros(3), -1.0)),
                   ("negative std tensor", lambda: t.normal(t.zeros(3), t.tensor([1.0, -1.0, 1.0]))),
                   ("negative std float", lambda: t.normal(0.0, -1.0, (2,))),
                   ("long mean", lambda: t.normal(t.zeros(3, dtype=t.long), 1.0)),
                   ("shapes", lambda: t.normal(t.zeros(3), t.ones(4))),
                   ("no size", lambda: t.normal(0.0, 1.0))):
        p.run(tag, f)
    p.counter("errors")
    t.manual_seed(7)
    a = t.normal(m, sd)
    t.manual_seed(7)
    b = t.normal(m, sd)
    p.value("repeats under manual_seed", t.equal(a, b))


@program("normal_: in place under no_grad (one version), NormalBackward0 with history, errors")
def _normal_(t, p):
    t.manual_seed(0)
    w = p.leaf("w", [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    p.run("leaf", lambda: w.normal_())
    with t.no_grad():
        r = w.normal_(0.0, 0.02)
    p.value("returns self", r is w)
    p.value("version", (w._version, tuple(w.shape), str(w.dtype)))
    h = w * 1
    h.normal_(mean=1.0, std=2.0)
    p.made("history", h * 0)
    p.watch(h, tag="NormalBackward0")
    p.value("grad", t.autograd.grad(h.sum(), [w]))
    p.value("std 0", t.zeros(3).normal_(mean=1.0, std=0.0))
    v = t.zeros(2, 4)
    v[0].normal_()
    p.value("view", (v._version, bool((v[1] == 0).all())))
    for tag, f in (("negative std", lambda: t.zeros(3).normal_(0, -1)),
                   ("long", lambda: t.zeros(3, dtype=t.long).normal_())):
        p.run(tag, f)
    p.counter("errors")


def _lbfgs_run(t, p, tag, **kwargs):
    """A few LBFGS steps on a small least-squares model; what the closure saw and made, each step."""
    w = t.tensor([[0.5, -0.3], [0.2, 0.8]], dtype=t.float64, requires_grad=True)
    b = t.tensor([0.1, -0.2], dtype=t.float64, requires_grad=True)
    x = t.tensor([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7]], dtype=t.float64)
    y = t.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=t.float64)
    opt = t.optim.LBFGS([w, b], **kwargs)
    calls = []

    def closure():
        opt.zero_grad()
        out = t.tanh(x @ w + b)
        loss = ((out - y) ** 2).sum() + 0.1 * (w ** 4).sum()
        loss.backward()
        calls.append((t.is_grad_enabled(), round(loss.item(), 10)))
        return loss

    for step in range(3):
        r = opt.step(closure)
        p.value(f"{tag} step {step}", (r, w, b, len(calls)))
        p.counter(f"{tag} step {step}")
    state = opt.state[w]
    p.value(f"{tag} calls", tuple(calls))
    p.value(f"{tag} state", (sorted(state), state["func_evals"], state["n_iter"], len(state["old_dirs"]),
                             float(state["t"]), state["prev_flat_grad"]))
    p.value(f"{tag} groups", ([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups],
                              (w._version, b._version)))


@program("LBFGS: fixed steps and strong_wolfe line search, closure calls under enable_grad, state, errors")
def _lbfgs(t, p):
    _lbfgs_run(t, p, "fixed", lr=0.2, max_iter=4)
    _lbfgs_run(t, p, "wolfe", lr=1, max_iter=5, history_size=3, line_search_fn="strong_wolfe")
    _lbfgs_run(t, p, "defaults")
    a = t.ones(2, requires_grad=True)
    c = t.ones(2, requires_grad=True)
    for tag, f in (("negative lr", lambda: t.optim.LBFGS([a], lr=-1.0)),
                   ("groups", lambda: t.optim.LBFGS([{"params": [a]}, {"params": [c]}])),
                   ("line search", lambda: t.optim.LBFGS([a], line_search_fn="armijo").step(
                       lambda: (a * a).sum().backward() or (a * a).sum()))):
        p.run(tag, f)
    p.counter("errors")
