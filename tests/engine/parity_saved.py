"""Programs of saved tensors, run on engine and torch by test_saved_parity.py: `grad_fn._saved_*` values and
identities, `_raw_saved_*` SavedTensors and `register_hooks`, `autograd.graph.saved_tensors_hooks`, `save_on_cpu`,
`disable_saved_tensors_hooks`, and custom Functions' `save_for_backward` under hooks (the "Saved tensors" part
of the autograd mechanics notes).

Each is `fn(t, p)`; see parity.py. Hooks record what they see with `p.value` (or into a list recorded later), so
the order and number of pack and unpack calls are compared. Besides these programs, `under_saved_tensor_hooks`
and `with_saved_attributes` wrap any parity program, so that the test file runs every program of the other
parity files with logging hooks and with every watched node's saved attributes recorded.
"""
from __future__ import annotations

import gc
import threading
from typing import Any, Callable

PROGRAMS: dict[str, Callable] = {}

XS = [-1.5, -0.4, 0.3, 1.1, 2.0]
YS = [0.5, 1.5, -2.0, 0.7, -0.2]
A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
B23 = [[0.3, 0.4, -0.5], [1.2, -0.8, 0.6]]
A234 = [[[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, 0.9], [0.2, 0.4, -0.6, 1.1]],
        [[1.1, 0.4, -0.9, -0.3], [0.2, -1.3, 0.8, 0.6], [-0.5, 0.7, 1.2, -1.0]]]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def describe_tensor(p: Any, t: Any) -> Any:
    """A tensor as a hook sees it, without its values: the leaf's name when it is one, shape, dtype, history."""
    if not hasattr(t, "grad_fn"):
        return ("not a tensor", type(t).__name__)
    return (p.labels.get(id(t)), tuple(t.shape), str(t.dtype), t.requires_grad,
            None if t.grad_fn is None else t.grad_fn.name())


def logging_hooks(t: Any, p: Any, tag: str = "") -> tuple[Callable, Callable]:
    """A pack and an unpack hook that pass the tensor through and record each call (and the grad mode)."""
    def pack(x):
        p.events.append(("pack" + tag, describe_tensor(p, x), t.is_grad_enabled()))
        return x

    def unpack(x):
        p.events.append(("unpack" + tag, describe_tensor(p, x), t.is_grad_enabled()))
        return x

    return pack, unpack


def _type(v: Any) -> Any:
    """A saved value with its Python type (torch returns ints, floats, bools, tuples, None)."""
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_type(x) for x in v))
    if hasattr(v, "grad_fn"):
        return ("tensor",)
    return (type(v).__name__, v)


def saved_attributes(p: Any, node: Any, values: bool = True) -> tuple:
    """The node's `_saved_*` / `_raw_saved_*` names (from dir()) and what each `_saved_*` reads (or raises)."""
    names = tuple(sorted(a for a in dir(node) if a.startswith("_saved_") or a.startswith("_raw_saved_")))
    read = []
    for name in names:
        if name.startswith("_raw_saved_"):
            continue
        try:
            v = getattr(node, name)
        except Exception as e:  # noqa: BLE001 - the error is what we compare
            read.append((name, "raised", type(e).__name__, str(e)))
            continue
        if isinstance(v, (tuple, list)) and any(hasattr(x, "grad_fn") for x in v):
            read.append((name, type(v).__name__, tuple(None if x is None else describe_tensor(p, x) for x in v)))
        elif hasattr(v, "grad_fn"):
            read.append((name, describe_tensor(p, v), v if values else None))
        else:
            read.append((name, _type(v)))
    return names, tuple(read)


# -- wrappers over every parity program -----------------------------------------------------------------------
def under_saved_tensor_hooks(fn: Callable) -> Callable:
    """`fn` run inside saved_tensors_hooks that log every pack and unpack call (no values: random ones differ)."""
    def wrapped(t, p):
        pack, unpack = logging_hooks(t, p)
        with t.autograd.graph.saved_tensors_hooks(pack, unpack):
            fn(t, p)
    return wrapped


def with_saved_attributes(fn: Callable) -> Callable:
    """`fn` with each watch() also recording the saved attributes of every node it reached so far."""
    def wrapped(t, p):
        watch = p.watch

        def watch_and_read(*tensors, **kwargs):
            watch(*tensors, **kwargs)
            for node in list(p.nodes):
                p.events.append(("saved", p.index[node], node.name(), saved_attributes(p, node, values=False)))

        p.watch = watch_and_read
        fn(t, p)
    return wrapped


# == the mechanics notes: what _saved_* gives back ==========================================================
@program("saved_self_and_result")
def _self_and_result(t, p):
    """`_saved_self` is the input object itself; `_saved_result` a new tensor object on each read, equal to the
    output, with the node as grad_fn; `_saved_exponent` the number; the same reads after backward."""
    x = p.leaf("x", XS)
    y = x.pow(2)
    p.value("pow node", saved_attributes(p, y.grad_fn))
    p.value("saved self is x", y.grad_fn._saved_self is x)
    e = x.exp()
    r1, r2 = e.grad_fn._saved_result, e.grad_fn._saved_result
    p.value("saved result is e", (r1 is e, r1 is r2))
    p.value("saved result", (r1.equal(e), r1.grad_fn is e.grad_fn, r1.requires_grad, r1.is_leaf, r1.output_nr,
                             r1._version))
    p.value("exp node", saved_attributes(p, e.grad_fn))
    p.watch(y, e)
    (y.sum() + e.sum()).backward()
    p.value("x.grad", x.grad)
    p.value("pow node after backward", saved_attributes(p, y.grad_fn))
    p.value("exp node after backward", saved_attributes(p, e.grad_fn))
    p.run("second backward", lambda: y.sum().backward())


def _steps_freeing_their_graphs(p: Any, forward: Callable[[], Any], first: Callable[[Any], None] = lambda loss: None):
    """Three steps of `loss = forward(); loss.backward(); del loss`, a pre-hook put on the leaf's AccumulateGrad in
    step 0 (after `first(loss)`), and how many times it fired after each step: once if each step frees its graph
    and so makes the leaf a new AccumulateGrad. The cycle collector is off, so that it cannot free a graph in the
    engine's place."""
    fired: list = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for step in range(3):
            loss = forward()
            if step == 0:
                first(loss)
                node = loss.grad_fn
                while "AccumulateGrad" not in node.name():
                    node = node.next_functions[0][0]
                node.register_prehook(lambda grads, fired=fired: fired.append(len(fired)))
                del node
            loss.backward()
            del loss
            p.value(f"pre-hook calls after step {step}", len(fired))
    finally:
        if collecting:
            gc.enable()


@program("a_freed_graph_goes_with_its_last_tensor")
def _freed_graph_goes(t, p):
    """A backward without retain_graph frees the saved tensors, each node's own output among them (exp and relu
    save theirs): the graph then goes with its last tensor, not at a later collection, so the next step's forward
    makes the leaf a new AccumulateGrad."""
    w = p.leaf("w", XS)
    _steps_freeing_their_graphs(p, lambda: (w * 2).relu().exp().sum())
    p.value("w.grad", w.grad)


@program("a_custom_function_s_freed_graph_goes_with_its_last_tensor")
def _custom_freed_graph_goes(t, p):
    """A custom Function that saves its own output: `ctx.to_save` is None once forward returns, and a backward
    without retain_graph frees what it saved, so the graph goes with its last tensor and the next step's forward
    makes the leaf a new AccumulateGrad."""
    class Exp(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    def first(loss):
        p.value("to_save after forward", loss.grad_fn.next_functions[0][0].to_save)

    w = p.leaf("w", XS)
    _steps_freeing_their_graphs(p, lambda: Exp.apply(w * 2).sum(), first)
    p.value("w.grad", w.grad)


@program("saved_none_and_numbers")
def _none_and_numbers(t, p):
    """What MulBackward0 saves for `x * 2` (the number, wrapped; self is not needed) and `x * c`; after backward a
    slot that saved nothing still reads None while a freed one raises."""
    x = p.leaf("x", XS)
    c = p.const(YS)
    m2, mc, mx = x * 2, x * c, x * x
    for tag, out in (("x * 2", m2), ("x * c", mc), ("x * x", mx)):
        p.value(tag, saved_attributes(p, out.grad_fn))
    p.value("x * x saves x twice", (mx.grad_fn._saved_self is x, mx.grad_fn._saved_other is x))
    (m2.sum() + mc.sum() + mx.sum()).backward()
    for tag, out in (("x * 2 after", m2), ("x * x after", mx)):
        p.value(tag, saved_attributes(p, out.grad_fn))


@program("saved_modified_in_place")
def _modified(t, p):
    """Reading a saved tensor that was modified in place since raises the version error, for an input and for an
    output (named after the op that made it)."""
    a = p.leaf("a", XS)
    b = a * 1
    s = b.sin()
    e = b.exp()
    with t.no_grad():
        b.add_(1)
        e.mul_(2)
    p.run("saved input", lambda: s.grad_fn._saved_self)
    p.run("saved output", lambda: e.grad_fn._saved_result)
    p.run("backward", lambda: s.sum().backward())
    p.value("versions", (b._version, e._version))


@program("saved_values_reductions")
def _values_reductions(t, p):
    """Sizes, dims (negative ones read back unsigned), keepdim, numel and var's correction, as saved."""
    x = p.leaf("x", A234)
    for tag, build in (
            ("sum", lambda: x.sum()),
            ("sum dim", lambda: x.sum(1)),
            ("sum dims", lambda: x.sum((-1, 0))),
            ("sum keepdim", lambda: x.sum(-2, keepdim=True)),
            ("mean", lambda: x.mean()),
            ("mean dims", lambda: x.mean((2, 0), keepdim=True)),
            ("max dim", lambda: x.max(-1)[0]),
            ("min dim", lambda: x.min(0, keepdim=True)[0]),
            ("max", lambda: x.max()),
            ("var", lambda: x.var()),
            ("var dim", lambda: x.var(1)),
            ("var unbiased", lambda: x.var(unbiased=False)),
            ("var correction", lambda: x.var((0, -1), correction=2)),
            ("std", lambda: x.std(-1, keepdim=True)),
            ("logsumexp", lambda: x.logsumexp((-1,))),
            ("norm", lambda: x.norm()),
            ("norm p", lambda: x.norm(1.5, -1)),
            ("softmax", lambda: x.softmax(-1)),
            ("log_softmax", lambda: x.log_softmax(0))):
        out = build()
        p.value(tag, (out.grad_fn.name(), saved_attributes(p, out.grad_fn)))


@program("saved_values_shapes")
def _values_shapes(t, p):
    """View, expand, transpose, permute, select, slice, squeeze, split, cat, stack, gather, indexing, as saved."""
    x = p.leaf("x", A234)
    y = p.leaf("y", A234)
    for tag, build in (
            ("view", lambda: x.view(-1, 4)),
            ("reshape copy", lambda: x.transpose(0, 1).reshape(-1)),
            ("expand", lambda: x[:1].expand(3, -1, -1, 4)),
            ("t", lambda: x[0].t()),
            ("transpose", lambda: x.transpose(-1, 0)),
            ("mT", lambda: x.mT),
            ("permute", lambda: x.permute(-1, 0, 1)),
            ("select", lambda: x[-1]),
            ("select dim", lambda: x.select(-1, -2)),
            ("slice", lambda: x[:, -2:]),
            ("slice stop", lambda: x[:, :-1]),
            ("slice step", lambda: x[..., 1::2]),
            ("unsqueeze", lambda: x.unsqueeze(-1)),
            ("squeeze", lambda: x[:, :1].squeeze(1)),
            ("squeeze all", lambda: x[:1].squeeze()),
            ("squeeze dims", lambda: x[:1, :1].squeeze((0, -2))),
            ("split", lambda: x.split(3, -1)[0]),
            ("split sizes", lambda: x.split([1, 3], -1)[1]),
            ("chunk", lambda: x.chunk(2, 1)[1]),
            ("unbind", lambda: x.unbind(-1)[2]),
            ("cat", lambda: t.cat([x, y], -1)),
            ("stack", lambda: t.stack([x, y], -2)),
            ("gather", lambda: x.gather(-1, t.tensor([[[0, 3]] * 3] * 2))),
            ("index_select", lambda: x.index_select(-1, t.tensor([3, 0]))),
            ("index", lambda: x[:, t.tensor([2, 0])]),
            ("index mask", lambda: x[x > 0]),
            ("index list", lambda: x[[1, 0]]),
            ("clone", lambda: x.clone()),
            ("masked_fill", lambda: x.masked_fill(x > 0, 0.5)),
            ("where", lambda: t.where(x > 0, x, y))):
        out = build()
        p.value(tag, (out.grad_fn.name(), saved_attributes(p, out.grad_fn)))


@program("saved_values_arithmetic")
def _values_arithmetic(t, p):
    """Scalars as given (alpha, exponent, clamp bounds: ints stay ints), and matmul's sizes and strides."""
    x = p.leaf("x", A23)
    y = p.leaf("y", B23)
    w = p.const(B23)
    for tag, build in (
            ("add", lambda: x + y),
            ("add alpha", lambda: x.add(y, alpha=-2.5)),
            ("sub alpha", lambda: x.sub(y, alpha=2)),
            ("rsub", lambda: 3 - x),
            ("pow", lambda: x ** 3),
            ("pow float", lambda: x ** -0.5),
            ("pow tensor", lambda: x.abs() ** y),
            ("rpow", lambda: 2 ** x),
            ("div", lambda: x / y),
            ("div number", lambda: x / 4),
            ("clamp", lambda: x.clamp(-1, 1.5)),
            ("clamp min", lambda: x.clamp(min=0)),
            ("clamp_max", lambda: x.clamp_max(0.4)),
            ("mm", lambda: x @ y.t()),
            ("mm const", lambda: x @ w.t()),
            ("mm t", lambda: x.t() @ y),
            ("addmm", lambda: t.nn.functional.linear(x, y, y[0, :2])),
            ("mv", lambda: x @ y[0]),
            ("dot", lambda: x[0] @ y[1]),
            ("bmm", lambda: t.bmm(x[None], y.t()[None])),
            ("maximum", lambda: t.maximum(x, y)),
            ("sgn", lambda: x.sgn()),
            ("sign", lambda: x.sign()),
            ("abs", lambda: x.abs()),
            ("relu", lambda: x.relu()),
            ("mse", lambda: t.nn.functional.mse_loss(x, y, reduction="sum"))):
        out = build()
        p.value(tag, (out.grad_fn.name(), saved_attributes(p, out.grad_fn)))


@program("saved_values_formula_graphs")
def _values_formulas(t, p):
    """The nodes derivative formulas record under create_graph (and those of the second order) save what torch's
    formulas save: dims passed on as given, ints where torch has ints."""
    x = p.leaf("x", A23)
    b = p.leaf("b", B23)
    outs = [x.tanh(), x.sigmoid(), (x * x + 1).sqrt(), x.mean(-1), x.var(-1), x.norm(dim=-1), x.logsumexp(-1),
            x.softmax(-1), x.softmax(0) * b, x.log_softmax(-1) * b, t.stack([x, b], -1).sum(-1), x.max(-1)[0],
            t.maximum(x, b), x.unsqueeze(-1).sum(-1), x[-1].sum() * x[:, -2], x.index_select(-1, t.tensor([0, 2, 0])),
            x[:, t.tensor([2, 0])], x.gather(1, t.tensor([[0, 0], [2, 1]])), x.permute(-1, 0), x.mT.exp()]
    total = sum(o.sum() for o in outs)
    (gx,) = t.autograd.grad(total, [x], create_graph=True)
    p.watch(gx, hooks=False, tag="formula graph")
    for node in p.nodes:
        p.value(f"node {p.index[node]}", (node.name(), saved_attributes(p, node)))
    (gx2,) = t.autograd.grad((gx * gx).sum(), [x], create_graph=True)
    first = len(p.nodes)
    p.watch(gx2, hooks=False, tag="second order graph")
    for node in p.nodes[first:]:
        p.value(f"node {p.index[node]}", (node.name(), saved_attributes(p, node)))


# == _raw_saved_* and SavedTensor.register_hooks ============================================================
@program("raw_saved_register_hooks")
def _register_hooks(t, p):
    """The mechanics notes' example: pack runs at once on a detached alias, unpack on every read and in backward;
    one pair per saved tensor; the errors for a second pair, a tensor saved as None, and a freed one."""
    x = p.leaf("x", XS)
    y = x.pow(2)
    raw = y.grad_fn._raw_saved_self
    p.value("type", type(raw).__name__)
    p.value("same object each read", raw is y.grad_fn._raw_saved_self)
    pack, unpack = logging_hooks(t, p, " raw")
    raw.register_hooks(pack, unpack)
    p.run("second pair", lambda: raw.register_hooks(pack, unpack))
    s = y.grad_fn._saved_self
    p.value("read", (describe_tensor(p, s), s is x, s.equal(x)))
    p.watch(y)
    y.sum().backward(retain_graph=True)
    p.value("x.grad", x.grad)
    y.sum().backward()
    p.run("after backward", lambda: raw.register_hooks(pack, unpack))
    p.run("read after backward", lambda: y.grad_fn._saved_self)
    m = x * 2
    p.run("saved None", lambda: m.grad_fn._raw_saved_self.register_hooks(pack, unpack))
    p.run("number packed by its raw", lambda: m.grad_fn._raw_saved_other.register_hooks(pack, unpack))
    p.value("number read", describe_tensor(p, m.grad_fn._saved_other))
    e = x.exp()
    e.grad_fn._raw_saved_result.register_hooks(pack, unpack)
    r = e.grad_fn._saved_result
    p.value("output read", (describe_tensor(p, r), r.grad_fn is e.grad_fn, r is e))
    try:
        x.sin().grad_fn._raw_saved_self.register_hooks(1, unpack)
    except TypeError as e:  # pybind11's text names the arguments by address: compare its first line
        p.value("not callable", str(e).splitlines()[0])


@program("raw_saved_unpack_errors")
def _unpack_errors(t, p):
    """An unpack hook must return a tensor; what it returns is what backward computes with."""
    x = p.leaf("x", XS)
    y = x.sin()
    y.grad_fn._raw_saved_self.register_hooks(lambda v: v, lambda v: 5)
    p.run("read", lambda: y.grad_fn._saved_self)
    p.run("backward", lambda: y.sum().backward())
    z = x.sin()
    z.grad_fn._raw_saved_self.register_hooks(lambda v: v * 0, lambda v: v)  # packs zeros: cos(0) = 1
    z.sum().backward()
    p.value("x.grad from the unpacked zeros", x.grad)


# == saved_tensors_hooks ====================================================================================
@program("default_hooks_pack_order")
def _pack_order(t, p):
    """Which tensors each op packs, in which order, and what the hooks are given (the objects themselves, under
    no_grad for pack); a Python number wrapped by `x * 2` is not packed."""
    x = p.leaf("x", XS)
    y = p.leaf("y", YS)
    h = x * 1
    m = p.leaf("m", A23)
    n = p.leaf("n", B23)
    pack, unpack = logging_hooks(t, p)
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        for tag, build in (("x * y", lambda: x * y), ("h * y", lambda: h * y), ("x * 2", lambda: x * 2),
                           ("x / y", lambda: x / y), ("exp", lambda: x.exp()), ("pow", lambda: x ** 2),
                           ("pow tensor", lambda: x.abs() ** y), ("mm", lambda: m @ n.t()),
                           ("linear", lambda: t.nn.functional.linear(m, n, n[0, :2])), ("max", lambda: x.max()),
                           ("maximum", lambda: t.maximum(x, y)), ("gather", lambda: m.gather(1, t.tensor([[0], [2]]))),
                           ("index", lambda: m[:, t.tensor([2, 0])]), ("mask", lambda: m[m > 0]),
                           ("softmax", lambda: m.softmax(-1)), ("mse", lambda: t.nn.functional.mse_loss(m, n))):
            p.events.append(("op", tag))
            out = build()
            p.value(tag + " saved self is x", getattr(out.grad_fn, "_saved_self", None) is x)
    p.value("self read outside the block", describe_tensor(p, out.grad_fn._saved_self))


@program("default_hooks_backward")
def _hooks_backward(t, p):
    """The mechanics notes' example: `a * b` packs b then a, backward unpacks them in that order with grad mode
    off; under create_graph unpack runs with grad mode on, and so do formulas' nodes' packs."""
    a = p.leaf("a", [1.0] * 5)
    b = p.leaf("b", [1.0] * 5) * 2
    pack, unpack = logging_hooks(t, p)
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a * b
        p.counter("forward")
        p.watch(y)
        y.sum().backward(retain_graph=True)
        p.value("a.grad", a.grad)
        (g,) = t.autograd.grad(y.sum(), [a], create_graph=True)
        p.counter("create_graph")
        p.watch(g, hooks=False, tag="formula graph")
    y.sum().backward()
    p.run("third backward", lambda: y.sum().backward())


@program("default_hooks_ops_inside")
def _ops_inside(t, p):
    """Ops inside a pack hook run under no_grad and take no seq_nr; an unpack hook's ops under create_graph record
    nodes, with seq_nrs, and their result becomes the saved tensor's value (history kept)."""
    x = p.leaf("x", XS)
    seen = []

    def pack(v):
        seen.append(("pack", (v * 2).requires_grad, t.autograd._get_sequence_nr() - p.base))
        return v

    def unpack(v):
        w = v * 1
        seen.append(("unpack", w.requires_grad, None if w.grad_fn is None else w.grad_fn.name()))
        return w

    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x.sin()
    p.counter("forward")
    (g,) = t.autograd.grad(y.sum(), [x], create_graph=True)
    p.counter("create_graph")
    p.watch(g, hooks=False, tag="formula graph")
    p.value("g", g)
    p.value("seen", tuple(seen))
    p.value("second", t.autograd.grad(g.sum(), [x]))


@program("default_hooks_nesting_and_threads")
def _nesting(t, p):
    """The innermost pair wins; hooks belong to the thread that pushed them; no node means no pack."""
    x = p.leaf("x", XS)
    outer = logging_hooks(t, p, " outer")
    inner = logging_hooks(t, p, " inner")
    with t.autograd.graph.saved_tensors_hooks(*outer):
        x.sin()
        with t.autograd.graph.saved_tensors_hooks(*inner):
            x.cos()
        x.exp()
        done = []
        thread = threading.Thread(target=lambda: done.append(x.sin().grad_fn.name()))
        thread.start()
        thread.join()
        p.value("other thread", tuple(done))
        with t.no_grad():
            x.sin()
        p.events.append(("after no_grad",))


@program("default_hooks_no_version_check")
def _no_version_check(t, p):
    """With hooks the saved tensor's version is not checked: backward uses what unpack returns; a pack hook may
    not modify its input in place; errors from the hooks propagate."""
    x = p.leaf("x", XS)
    h = x * 1
    with t.autograd.graph.saved_tensors_hooks(lambda v: v.clone(), lambda v: v):
        y = h.sin()
    with t.no_grad():
        h.add_(1)
    p.run("backward", lambda: y.sum().backward())
    p.value("x.grad from the packed copy", x.grad)
    with t.autograd.graph.saved_tensors_hooks(lambda v: v.mul_(1), lambda v: v):
        p.run("pack in place", lambda: h.sin())

    def bad(v):
        raise ValueError("pack refused")

    with t.autograd.graph.saved_tensors_hooks(bad, lambda v: v):
        p.run("pack raises", lambda: x.sin())
    p.counter("after pack raises")
    with t.autograd.graph.saved_tensors_hooks(lambda v: v, lambda v: None):
        z = x.sin()
    p.run("unpack returns None", lambda: z.sum().backward())


@program("save_on_cpu")
def _save_on_cpu(t, p):
    """save_on_cpu on CPU tensors: grads unchanged; with pin_memory the packed tensor is a copy, so a later
    in-place change does not reach backward, while without it the saved tensor is the original."""
    x = p.leaf("x", XS)
    results = []
    for pin in (False, True):
        h = x * 1
        with t.autograd.graph.save_on_cpu(pin_memory=pin):
            y = (h.sin() * h).sum()
        p.watch(y)
        with t.no_grad():
            h.mul_(2)
        (g,) = t.autograd.grad(y, [x])
        results.append(g)
    p.value("grads", tuple(results))


@program("disable_saved_tensors_hooks")
def _disable(t, p):
    """Inside disable_saved_tensors_hooks, pushing hooks raises the given message, as does entering it while hooks
    are pushed; a nested block restores the outer message; register_hooks still works."""
    x = p.leaf("x", XS)
    pack, unpack = logging_hooks(t, p)
    with t.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        p.run("push", lambda: t.autograd.graph.saved_tensors_hooks(pack, unpack).__enter__())
        with t.autograd.graph.disable_saved_tensors_hooks("inner"):
            p.run("push inner", lambda: t.autograd.graph.saved_tensors_hooks(pack, unpack).__enter__())
        p.run("push after inner", lambda: t.autograd.graph.saved_tensors_hooks(pack, unpack).__enter__())
        y = x.sin()
        p.run("register_hooks", lambda: y.grad_fn._raw_saved_self.register_hooks(pack, unpack))
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        p.run("disable under pushed hooks", lambda: t.autograd.graph.disable_saved_tensors_hooks("refused").__enter__())
        x.cos()
    p.counter("end")
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        x.exp()


# == custom Functions =======================================================================================
class _Saving:
    """Saves an input, its output, None and another input, in that order."""

    @staticmethod
    def forward(ctx, a, b):
        out = a * b
        ctx.save_for_backward(b, out, None, a)
        return out

    @staticmethod
    def backward(ctx, g):
        b, out, none, a = ctx.saved_tensors
        return g * b, g * a


def _saving_function(t):
    return type("Saving", (t.autograd.Function,), {"forward": _Saving.forward, "backward": _Saving.backward})


@program("custom_function_saved_tensors")
def _custom_saved(t, p):
    """ctx.saved_tensors without hooks: inputs come back as themselves, the output as a new object with the node as
    grad_fn, None as None; `_raw_saved_tensors` has one SavedTensor per entry; both raise once freed."""
    a = p.leaf("a", XS)
    b = p.leaf("b", YS) * 1
    out = _saving_function(t).apply(a, b)
    st = out.grad_fn.saved_tensors
    p.value("identities", (st[0] is b, st[1] is out, st[1].grad_fn is out.grad_fn, st[2], st[3] is a))
    raw = out.grad_fn._raw_saved_tensors
    p.value("raw", (type(raw).__name__, tuple(type(r).__name__ for r in raw)))
    p.run("register on None", lambda: raw[2].register_hooks(lambda v: v, lambda v: v))
    p.watch(out)
    out.sum().backward()
    p.value("grads", (a.grad,))
    p.run("saved_tensors after backward", lambda: out.grad_fn.saved_tensors)
    p.run("raw after backward", lambda: out.grad_fn._raw_saved_tensors)


@program("custom_function_hooks")
def _custom_hooks(t, p):
    """save_for_backward packs when forward returns (None skipped, the output included), under no_grad; each
    read of saved_tensors unpacks every entry; register_hooks on one raw entry."""
    a = p.leaf("a", XS)
    b = p.leaf("b", YS) * 1
    fn = _saving_function(t)
    pack, unpack = logging_hooks(t, p)
    with t.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = fn.apply(a, b)
    p.events.append(("applied",))
    st = out.grad_fn.saved_tensors
    p.value("read", (tuple(None if v is None else describe_tensor(p, v) for v in st), st[3] is a))
    p.watch(out)
    out.sum().backward(retain_graph=True)
    p.value("a.grad", a.grad)
    out2 = fn.apply(a, b)
    out2.grad_fn._raw_saved_tensors[0].register_hooks(*logging_hooks(t, p, " raw"))
    p.run("second pair", lambda: out2.grad_fn._raw_saved_tensors[0].register_hooks(pack, unpack))
    out2.sum().backward()
    p.value("a.grad again", a.grad)


@program("second_backward_needs_saved_tensors")
def _second_backward(t, p):
    """Backward frees saved tensors: a second one raises where a node saved some, not where none did."""
    x = p.leaf("x", XS)
    y = (x + 1).sum()
    y.backward()
    p.run("no saved tensors", y.backward)
    z = (x * x).sum()
    z.backward()
    p.run("saved tensors", z.backward)
    p.value("x.grad", x.grad)
    p.value("mul node", saved_attributes(p, z.grad_fn.next_functions[0][0]))


@program("saved_values_nn")
def _values_nn(t, p):
    """The saved tensors (with their values) and arguments of the nn nodes: nll_loss's total_weight (0 when
    unreduced over a batch), its weight None when not given, layer_norm's mean and rstd, gelu's approximate,
    embedding's padding_idx (as given by the functional: a negative one made positive), bce's weights."""
    x = p.leaf("x", A23)
    f = t.nn.functional
    target = t.tensor([2, 0])
    w = p.const([0.5, 2.0, 1.5])
    table = p.leaf("table", [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    for tag, build in (
            ("nll none", lambda: f.nll_loss(x, target, reduction="none")),
            ("nll none weighted", lambda: f.nll_loss(x, target, weight=w, reduction="none")),
            ("nll 1-d none", lambda: f.nll_loss(x[0], target[0], reduction="none")),
            ("nll sum ignore", lambda: f.nll_loss(x, target, weight=w, ignore_index=0, reduction="sum")),
            ("nll mean", lambda: f.nll_loss(x, target)),
            ("layer_norm", lambda: f.layer_norm(x, (3,), w, w)),
            ("gelu tanh", lambda: f.gelu(x, approximate="tanh")),
            ("embedding", lambda: f.embedding(t.tensor([[0, 2], [1, 1]]), table, padding_idx=-2)),
            ("bce weights", lambda: f.binary_cross_entropy_with_logits(x, x.detach().sigmoid(), weight=w,
                                                                        pos_weight=w, reduction="sum")),
            ("logsigmoid", lambda: f.logsigmoid(x))):
        out = build()
        p.value(tag, (out.grad_fn.name(), saved_attributes(p, out.grad_fn)))
