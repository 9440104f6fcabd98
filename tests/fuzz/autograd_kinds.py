"""The statement kinds that exercise autograd itself: in-place ops, backward and autograd.grad, hooks, custom
Functions, grad-mode switches, nn modules and losses, optimizers, and an everyday training step.

Imports numpy, the standard library and the generator only.
"""
from __future__ import annotations

from tests.fuzz.generator import FLOAT, KNOWN_GAPS, Generator, Var, broadcast, kind, values

# -- in-place ---------------------------------------------------------------------------------------------
# op: (templates, reads a source tensor or scalar "{s}", the source must be positive, result positive)
INPLACE: dict[str, tuple[tuple[str, ...], bool, bool, str, float]] = {
    "add_": (("{0}.add_({s})", "{0} += {s}", "{0}.add_({s}, alpha=0.5)"), True, False, "", 5),
    "sub_": (("{0}.sub_({s})", "{0} -= {s}"), True, False, "", 2),
    "mul_": (("{0}.mul_({s})", "{0} *= {s}"), True, False, "", 4),
    "div_": (("{0}.div_({s})", "{0} /= {s}"), True, True, "", 1),
    "pow_": (("{0}.pow_(2)",), False, False, "", 0.5),
    "exp_": (("{0}.exp_()",), False, False, "pos", 0.5),
    "neg_": (("{0}.neg_()",), False, False, "", 0.3),
    "relu_": (("{0}.relu_()", "t.relu_({0})", "t.nn.functional.relu({0}, inplace=True)"), False, False, "", 1),
    "leaky_relu_": (("t.nn.functional.leaky_relu_({0}, 0.2)", "t.nn.functional.leaky_relu({0}, 0.1, inplace=True)",
                     "t.nn.LeakyReLU(0.2, inplace=True)({0})"), False, False, "", 0.7),
    "sigmoid_": (("{0}.sigmoid_()",), False, False, "pos", 0.5),
    "tanh_": (("{0}.tanh_()",), False, False, "", 0.5),
    "abs_": (("{0}.abs_()",), False, False, "", 0.3),
    "sqrt_": (("{0}.sqrt_()",), False, False, "pos", 0.3),
    "clamp_": (("{0}.clamp_(-1, 1)", "{0}.clamp_(min=0.1)"), False, False, "", 0.5),
    "zero_": (("{0}.zero_()",), False, False, "", 0.5),
    "fill_": (("{0}.fill_(0.5)",), False, False, "pos", 0.3),
    "copy_": (("{0}.copy_({s})",), True, False, "", 1),
    "masked_fill_": (("{0}.masked_fill_({0} > 1, 0.0)",), False, False, "", 0.5),
    "setitem": (("{0}[0] = {s}", "{0}[..., 0] = 0.0"), True, False, "", 1.5),
    "setitem_mask": (("{0}[{0} < 0] = 0.0", "{0}[{0} > 0.5031] = 2.0"), False, False, "", 0.7),
    "index_put_": (("{0}.index_put_((t.tensor([0]),), t.tensor(0.5, dtype={0}.dtype))",
                    "{0}[t.tensor([0, 0])] = 1.0"), False, False, "", 0.4),
    "t_": (("{0}.t_()",), False, False, "", 0.2),
    "unsqueeze_": (("{0}.unsqueeze_(0)",), False, False, "", 0.2),
}


REFUSED_INPLACE = ("pow_", "exp_", "neg_", "sigmoid_", "tanh_", "abs_", "sqrt_", "clamp_", "t_",
                   "unsqueeze_")
"""In-place ops the engine refuses with NotImplementedError (engine/_inplace.py): see ABSENT."""


@kind("inplace", 7)
def inplace(g: Generator) -> None:
    """An in-place op on an intermediate with history, a view, a tensor without history, or a leaf."""
    target = g.weighted({"history": 5, "view": 2, "plain": 2, "leaf": 0.4, "leaf_no_grad": 2})
    if target == "leaf_no_grad":
        g.s.mode = "no_grad"
    x = _inplace_target(g, target)
    if x is None:
        return
    ops = {k: w for k, (_, _, pos_src, res, w) in INPLACE.items() if (k != "sqrt_" or x.positive)
           and (k not in REFUSED_INPLACE or g.allow("refused_inplace"))}
    if not x.shape:
        ops = {k: w for k, w in ops.items() if k not in ("setitem", "index_put_", "t_")}
    if len(x.shape or ()) != 2:
        ops.pop("t_", None)
    op = g.weighted(ops)
    if op == "setitem_mask" and not x.shape and not g.allow("zero_dim_mask_assign"):
        op = "masked_fill_"
    forms, reads, pos_src, result, _ = INPLACE[op]
    if target == "leaf_no_grad" and x.has_grad and op in ("add_", "sub_") and g.chance(0.7):
        if g.may_write(x):
            sgd_update(g, x)
        return
    text = g.pick_item(list(forms))
    src = _source(g, _row(x) if op == "setitem" and "{s}" in text else x, pos_src) if reads else None
    through_view = op == "setitem" and not x.is_view and (x.rg or isinstance(src, Var) and src.rg)
    if through_view and g.s.mode is None and not g.allow("inplace_on_view"):
        return
    if g.may_write(x, src if isinstance(src, Var) else None):
        _write(g, x, op, text, src, result)


def _inplace_target(g: Generator, target: str) -> Var | None:
    floats = lambda v: v.dtype in FLOAT and v.shape is not None  # noqa: E731
    if target == "history":
        return g.pick(lambda v: floats(v) and v.history and not v.is_view)
    if target == "view":
        return g.pick(lambda v: floats(v) and v.is_view)
    if target == "plain":
        return g.pick(lambda v: floats(v) and not v.rg and not v.is_view) or g.leaf(rg=False)
    return g.pick(lambda v: floats(v) and v.rg and v.leaf and not v.is_view)


def _row(x: Var) -> Var:
    return Var("", x.shape[1:], x.dtype)


def _source(g: Generator, x: Var, positive: bool):
    """A Python scalar, or a tensor that broadcasts to `x`'s shape."""
    if g.chance(0.45):
        return g.pick_item(["0.5", "2", "1.5"] if positive else ["1", "0.5", "-0.25", "2"])
    s = g.pick(lambda v: v.dtype in FLOAT and v.shape is not None and broadcast(x.shape, v.shape) == x.shape
               and v.name != x.name and (v.positive or not positive))
    return s or g.leaf(x.shape[1:] if x.shape and g.chance(0.3) else x.shape, positive=positive or None,
                       rg=g.chance(0.5))


def _write(g: Generator, x: Var, op: str, text: str, src, result: str) -> None:
    ins = [x]
    if isinstance(src, Var):
        ins.append(src)
        text = text.replace("{s}", "{1}")
    elif src is not None:
        text = text.replace("{s}", src)
    root = g.s.vars[x.root]
    if x.is_view:
        ins.append(root)
    made = ("{0}",) + (("{%d}" % (len(ins) - 1),) if x.is_view else ())
    g.emit("inplace", op, text, ins, [], made=made)
    _after_write(g, x, root, src if isinstance(src, Var) else None, op, result)


def _after_write(g: Generator, x: Var, root: Var, src: Var | None, op: str, result: str) -> None:
    if g.s.mode is None and (x.rg or (src is not None and src.rg)):
        anc = x.anc | (src.anc | {src.name} if src is not None and src.rg else frozenset())
        if not (x.leaf and x.rg):
            x.rg, x.leaf, x.anc = True, False, anc
            if x.is_view:
                root.rg, root.leaf, root.anc = True, False, root.anc | anc
    if src is not None:
        x.saw.update({r: n for r, n in src.saw.items() if n < x.saw.get(r, n + 1)})
    g.wrote(x)
    x.positive = result == "pos"
    x.indexed = x.indexed or op in ("setitem_mask", "index_put_", "masked_fill_")
    if op == "t_":
        x.shape = x.shape[::-1]
        x.contiguous = False
    elif op == "unsqueeze_":
        x.shape = (1,) + x.shape


def sgd_update(g: Generator, w: Var) -> None:
    """The hand-written SGD step on a leaf, under no_grad."""
    text = g.pick_item(["{0} -= 0.1 * {0}.grad", "{0}.sub_({0}.grad, alpha=0.1)", "{0}.add_({0}.grad, alpha=-0.05)"])
    if not g.allow("none_operand"):  # the generator's idea of which leaves have a grad can be wrong
        text = "if {0}.grad is not None:\n    " + text
    g.emit("inplace", "sgd_update", text, [w], [], made=("{0}",), mode="no_grad")
    g.wrote(w)
    w.positive = False


# -- backward ----------------------------------------------------------------------------------------------
def hazards(g: Generator, v: Var) -> list[str]:
    """The known-gap constructs a backward from `v` may meet."""
    found = ["modified_saved"] if g.modified(v) else []
    names = v.anc | {v.name}
    if any(n in g.s.vars and g.s.vars[n].spent and g.s.vars[n].indexed for n in names):
        found.append("freed_index_backward")
    return found


def root_scalar(g: Generator) -> Var:
    """A scalar with history to run backward from, reduced from a tensor with history when needed (its
    statements run with grad on, whatever the statement that asked)."""
    mode, g.s.mode = g.s.mode, None
    try:
        return _root_scalar(g)
    finally:
        g.s.mode = mode


def _root_scalar(g: Generator) -> Var:
    safe = lambda v: g.s.known_gaps or not any(h in KNOWN_GAPS for h in hazards(g, v))  # noqa: E731
    x = g.pick(lambda v: v.dtype in FLOAT and v.history and not v.spent and v.shape is not None and safe(v))
    if x is None:
        x = g.pick(lambda v: v.dtype in FLOAT and v.history and v.shape is not None and safe(v))
    if x is not None:
        for h in hazards(g, x):
            g.allow(h)
    if x is None:
        leaf = g.pick(lambda v: v.dtype in FLOAT and v.rg and v.leaf and v.shape is not None) or g.leaf(rg=True)
        x = g.derived(leaf.shape, leaf.dtype, leaf)
        g.emit("unary", "tanh", "{out0} = {0}.tanh()", [leaf], [x], mode=None)
    if x.shape == ():
        return x
    out = g.derived((), x.dtype, x)
    text = g.pick_item(["{0}.sum()", "{0}.sum()", "{0}.mean()", "({0} ** 2).mean()", "{0}.pow(2).sum()"])
    g.emit("reduce", "sum" if "sum" in text else "mean", "{out0} = " + text, [x], [out], mode=None)
    return out


def _watched(roots: str) -> str:
    return f'p.watch({roots}, hooks="new", tag="{{tag}} graph")\n'


@kind("backward", 7)
def backward(g: Generator) -> None:
    """backward(), with retain_graph, a gradient, inputs=, several roots or create_graph; maybe anomaly mode."""
    variant = g.weighted({"plain": 6, "retain": 2, "gradient": 1.5, "inputs": 1.5, "roots": 1, "create_graph": 1})
    anomaly = g.chance(0.08)
    if variant == "gradient":
        x = g.pick(lambda v: v.dtype in FLOAT and v.history and v.shape not in (None, ()) and
                   (g.s.known_gaps or not any(h in KNOWN_GAPS for h in hazards(g, v))))
        if x is not None:
            for h in hazards(g, x):
                g.allow(h)
            text = g.pick_item(["{0}.backward(t.ones_like({0}))", "{0}.backward(t.full_like({0}, 0.5))",
                                "{0}.backward(gradient=t.ones_like({0}), retain_graph=True)"])
            _emit_backward(g, [x], _watched("{0}") + text, anomaly, retain="retain" in text)
            return
    root = root_scalar(g)
    if variant == "inputs":
        inputs = _reachable(g, root, 2) or [root]
        refs = ", ".join(f"{{{i + 1}}}" for i in range(len(inputs)))
        text = _watched("{0}") + f"{{0}}.backward(inputs=[{refs}])\n" + \
            f'p.value("{{tag}} inputs", ({", ".join(f"{{{i + 1}}}.grad" for i in range(len(inputs)))},))'
        _emit_backward(g, [root] + inputs, text, anomaly, retain=False, reached=inputs)
        return
    if variant == "roots":
        other = root_scalar(g)
        text = _watched("{0}, {1}") + g.pick_item(["t.autograd.backward([{0}, {1}])",
                                                    "t.autograd.backward(({0}, {1}), retain_graph=True)"])
        _emit_backward(g, [root, other], text, anomaly, retain="retain" in text)
        return
    call = {"plain": "{0}.backward()", "retain": "{0}.backward(retain_graph=True)",
            "create_graph": "{0}.backward(create_graph=True)", "gradient": "{0}.backward()"}[variant]
    _emit_backward(g, [root], _watched("{0}") + call, anomaly, retain=variant != "plain" and variant != "gradient",
                   create_graph=variant == "create_graph")


def _emit_backward(g: Generator, ins: list[Var], text: str, anomaly: bool, retain: bool,
                   create_graph: bool = False, reached: list[Var] | None = None) -> None:
    roots = [v for v in ins if v.shape is not None][:2] if reached is None else ins[:1]
    g.emit("backward", "backward", text + '\np.value("{tag} grads", {grads})', ins, [], anomaly=anomaly, mode=None)
    for r in roots:
        for name in (reached and [v.name for v in reached]) or r.anc:
            v = g.s.vars.get(name)
            if v is not None and v.leaf:
                v.has_grad = True
                v.grad_noisy = v.grad_noisy or r.noisy
                v.grad_rg = create_graph
                v.info["grad_saw"] = dict(r.saw) if create_graph else {}
        if not retain:
            spend(g, r)


def spend(g: Generator, root: Var) -> None:
    """Mark the graph below `root` as freed."""
    root.spent = True
    for name in root.anc:
        if name in g.s.vars and g.s.vars[name].history:
            g.s.vars[name].spent = True


def _reachable(g: Generator, root: Var, k: int) -> list[Var]:
    cands = [g.s.vars[n] for n in sorted(root.anc) if n in g.s.vars and g.usable(g.s.vars[n])]
    if not cands:
        return []
    idx = g.rng.choice(len(cands), size=min(k, len(cands)), replace=False)
    return [cands[int(i)] for i in sorted(idx)]


@kind("grad", 3)
def grad(g: Generator) -> None:
    """autograd.grad over reachable and unreachable inputs, with allow_unused, retain_graph, create_graph."""
    root = root_scalar(g)
    inputs = _reachable(g, root, int(g.rng.integers(1, 3)))
    unreachable = g.pick(lambda v: v.dtype in FLOAT and v.rg and v.name not in root.anc and v.name != root.name)
    if unreachable is not None and (g.chance(0.3) or not inputs):
        inputs.append(unreachable)
    if not inputs:
        inputs = [root]
    allow = unreachable in inputs and g.chance(0.9) or g.chance(0.1)
    create = g.chance(0.3)
    retain = g.chance(0.3)
    kw = (", allow_unused=True" if allow else "") + (", create_graph=True" if create else "") + \
        (", retain_graph=True" if retain else "")
    outs = []
    for v in inputs:
        if v.name in root.anc or v is root:
            outs.append(Var(g.fresh(), v.shape, v.dtype, rg=create, leaf=not create, anc=root.anc if create else
                            frozenset(), grad_alias=True, contiguous=False, saw=dict(root.saw) if create else {},
                            noisy=root.noisy))
        else:
            outs.append(Var(g.fresh(), None, "none"))
    refs = ", ".join(f"{{{i + 1}}}" for i in range(len(inputs)))
    names = ", ".join(f"{{out{i}}}" for i in range(len(outs)))
    text = _watched("{0}") + f"{names}{',' if len(outs) == 1 else ''} = t.autograd.grad({{0}}, [{refs}]{kw})"
    g.emit("grad", "grad", text, [root] + inputs, outs, made=tuple(f"{{out{i}}}" for i in range(len(outs))),
           anomaly=g.chance(0.05), mode=None)
    if not retain and not create:
        spend(g, root)


@kind("grad_access", 3)
def grad_access(g: Generator) -> None:
    """Read a leaf's .grad into a variable, set it to None, or zero it in place."""
    w = g.pick(lambda v: v.leaf and v.rg and v.has_grad)
    if w is None:
        backward(g)
        return
    op = g.weighted({"read": 3, "none": 1, "zero": 1})
    if op == "read":
        rg = getattr(w, "grad_rg", False)
        out = Var(g.fresh(), w.shape, w.dtype, rg=rg, leaf=not rg, anc=frozenset({w.name}) if rg else frozenset(),
                  grad_alias=True, contiguous=False, saw=dict(w.info.get("grad_saw", {})), noisy=w.grad_noisy)
        text = "{out0} = {0}.grad"
        if not g.allow("none_operand"):  # the generator's idea of which leaves have a grad can be wrong
            text += " if {0}.grad is not None else t.zeros_like({0})"
        g.emit("grad_access", "read_grad", text, [w], [out])
    elif op == "none":
        g.emit("grad_access", "grad_none", "{0}.grad = None", [w], [], made=("{0}",))
        w.has_grad = False
    else:
        g.emit("grad_access", "grad_zero", "{0}.grad.zero_()", [w], [], made=("{0}.grad",))


# -- hooks --------------------------------------------------------------------------------------------------
_TENSOR_HOOK_RETURNS = {"": 3, "return grad * 2": 1, "return grad + 1": 0.5}


@kind("hook", 4)
def hook(g: Generator) -> None:
    """A tensor hook, retain_grad, a Node pre- or post-hook, a post-accumulate-grad hook, or a removal."""
    handles = [v for v in g.s.vars.values() if v.dtype == "handle"]
    op = g.weighted({"tensor": 3, "retain_grad": 2, "node_post": 1, "node_pre": 1, "post_accumulate": 1,
                     "remove": 2 if handles else 0})
    if op == "remove":
        h = g.pick_item(handles)
        g.emit("hook", "remove", "{0}.remove()", [h], [])
        h.dtype = "removed"
        return
    if op == "post_accumulate":
        w = g.pick(lambda v: v.leaf and v.rg) or g.leaf(rg=True)
        ret = "\n    return param.grad * 2" if g.chance(0.1) else ""
        text = ("def {tag}_hook(param):\n    p.value(\"{tag} hook\", param.grad)" + ret +
                "\n{out0} = {0}.register_post_accumulate_grad_hook({tag}_hook)")
        g.emit("hook", op, text, [w], [Var(g.fresh("h"), None, "handle")])
        return
    x = g.pick(lambda v: v.dtype in FLOAT and (v.history if op.startswith("node") else v.rg))
    if x is None:
        x = root_scalar(g)
    if op == "retain_grad":
        g.emit("hook", op, "{0}.retain_grad()", [x], [], grad_of=("{0}",))
    elif op == "tensor":
        stale = [r for r in (g.s.vars.get(x.root) if x.is_view else None, g.s.vars.get(x.maybe_root))
                 if r is not None and r.writes > x.saw.get(r.name, 0)]
        if stale and not g.allow("stale_view_hook"):
            return  # ABSENT["stale_view_hook"]: torch 2.13 segfaults here
        ret = g.weighted(_TENSOR_HOOK_RETURNS)
        body = "\n    " + ret if ret else ""
        text = ("def {tag}_hook(grad):\n    p.value(\"{tag} hook\", grad)" + body +
                "\n{out0} = {0}.register_hook({tag}_hook)")
        g.emit("hook", op, text, [x], [Var(g.fresh("h"), None, "handle")])
    elif op == "node_post":
        ret = "\n    return tuple(None if gi is None else gi * 3 for gi in grad_inputs)" if g.chance(0.3) else ""
        text = ("def {tag}_hook(grad_inputs, grad_outputs):\n    p.value(\"{tag} hook\", (grad_inputs, grad_outputs))"
                + ret + "\n{out0} = {0}.grad_fn.register_hook({tag}_hook)")
        g.emit("hook", op, text, [x], [Var(g.fresh("h"), None, "handle")])
    else:
        ret = "\n    return tuple(None if go is None else go * 2 for go in grad_outputs)" if g.chance(0.3) else ""
        text = ("def {tag}_hook(grad_outputs):\n    p.value(\"{tag} hook\", grad_outputs)" + ret +
                "\n{out0} = {0}.grad_fn.register_prehook({tag}_hook)")
        g.emit("hook", op, text, [x], [Var(g.fresh("h"), None, "handle")])


# -- custom Functions -------------------------------------------------------------------------------------------
@kind("function", 2)
def function(g: Generator) -> None:
    """A custom autograd.Function: two outputs and non-tensor arguments, a non-differentiable output,
    setup_context, once_differentiable."""
    x = g.pick_float()
    op = g.weighted({"ScaleMul": 2, "Clip": 1, "Cube": 1, "OnceExp": 1})
    if op == "ScaleMul":
        y = g.pick(lambda v: v.shape == x.shape and v.dtype == x.dtype and v.name != x.name) or g.leaf(
            x.shape, dtype=x.dtype)
        alpha, square = g.pick_item(["0.5", "2", "-1.5"]), g.pick_item(["True", "False"])
        outs = [g.derived(x.shape, x.dtype, x, y), g.derived(x.shape, x.dtype, x, y)]
        g.emit("function", op, f"{{out0}}, {{out1}} = ScaleMul.apply({{0}}, {{1}}, {alpha}, {square})", [x, y],
               outs, helper=op)
    elif op == "Clip":
        outs = [g.derived(x.shape, x.dtype, x), Var(g.fresh(), x.shape, "b")]
        g.emit("function", op, "{out0}, {out1} = Clip.apply({0}, 0.8)", [x], outs, helper=op)
    else:
        out = g.derived(x.shape, x.dtype, x, positive=op == "OnceExp")
        g.emit("function", op, f"{{out0}} = {op}.apply({{0}})", [x], [out], helper=op)


# -- grad mode and requires_grad -----------------------------------------------------------------------------
@kind("tensor_mode", 2)
def tensor_mode(g: Generator) -> None:
    """requires_grad_() on or off, detach_(), .data, and a fresh leaf cut from a graph."""
    op = g.weighted({"requires_grad_": 2, "requires_grad_off": 1, "detach_": 1, "data": 1, "new_leaf": 1})
    if op == "requires_grad_":
        x = g.pick(lambda v: v.dtype in FLOAT and v.leaf and not v.rg and not v.is_view and
                   (not v.grad_alias or g.s.known_gaps or "grad_layout" not in KNOWN_GAPS)) or g.leaf(rg=False)
        if x.grad_alias:
            g.allow("grad_layout")
        if any(v.is_view and v.root == x.root for v in g.s.vars.values()) and not g.allow("view_under_no_grad"):
            return
        g.emit("tensor_mode", op, "{0}.requires_grad_()", [x], [], made=("{0}",), grad_of=("{0}",))
        x.rg, x.anc = True, frozenset()
    elif op == "requires_grad_off":
        x = g.pick(lambda v: v.dtype in FLOAT and v.leaf and v.rg) or g.leaf(rg=True)
        g.emit("tensor_mode", op, "{0}.requires_grad_(False)", [x], [], made=("{0}",))
        x.rg = False
    elif op == "detach_":
        x = g.pick(lambda v: v.dtype in FLOAT and v.history) or root_scalar(g)
        if (x.is_view or g.s.mode) and not g.allow("detach_view"):
            return
        if (x.grad_alias and not g.allow("grad_layout")) or (x.read and not g.allow("detach_saved")):
            return
        g.emit("tensor_mode", op, "{0}.detach_()", [x], [], made=("{0}",))
        if not x.is_view and not g.s.mode:
            x.rg, x.leaf, x.anc = False, True, frozenset()
    elif op == "data":
        x = g.pick_float()
        if not g.allow("data_version"):
            return
        g.emit("tensor_mode", op, "{out0} = {0}.data", [x], [g.alias(x)])
    else:
        x = g.pick_float()
        out = Var(g.fresh(), x.shape, x.dtype, rg=True, positive=x.positive,
                  kernel_version=x.inference and g.s.mode != "inference_mode")
        g.emit("tensor_mode", op, "{out0} = {0}.detach().clone().requires_grad_()", [x], [out],
               grad_of=("{out0}",))


# -- nn ------------------------------------------------------------------------------------------------------
def _weights(g: Generator, names: dict[str, tuple[int, ...]]) -> str:
    items = ", ".join(f'"{k}": p.const({values(g.rng, s, False)})' for k, s in names.items())
    return "{{" + items + "}}"


@kind("module", 3)
def module(g: Generator) -> None:
    """Make an nn module with written-out weights (Linear, a small Sequential, LayerNorm, Embedding), or
    call one."""
    mods = [v for v in g.s.vars.values() if v.dtype == "module"]
    if mods and g.chance(0.6):
        call_module(g, g.pick_item(mods))
        return
    call_module(g, make_module(g))


def make_module(g: Generator) -> Var:
    """A module whose parameters are loaded from written-out data."""
    x = g.pick(lambda v: v.dtype == "f64" and v.shape not in (None, ()) and v.shape[-1] <= 4)
    k = x.shape[-1] if x is not None else 3
    # LayerNorm over one element normalises to exactly 0 in the engine and to rounding noise in torch, which
    # an adaptive optimizer then scales up: not a difference worth reporting
    op = g.weighted({"Linear": 4, "Sequential": 1.5, "LayerNorm": 1 if k > 1 else 0, "Embedding": 0.5})
    m = Var(g.fresh("m"), None, "module")
    n = {"Linear": int(g.rng.integers(1, 4)), "Sequential": 2, "LayerNorm": k, "Embedding": k}[op]
    m.info = {"kind": op, "in": k, "out": n}
    if op == "Linear":
        params = {"weight": (n, k), "bias": (n,)}
        make = f"t.nn.Linear({k}, {n}, dtype=t.float64)"
    elif op == "Sequential":
        act = g.pick_item(["t.nn.Tanh()", "t.nn.ReLU()", "t.nn.GELU()", "t.nn.Sigmoid()"])
        params = {"0.weight": (3, k), "0.bias": (3,), "2.weight": (2, 3), "2.bias": (2,)}
        make = f"t.nn.Sequential(t.nn.Linear({k}, 3, dtype=t.float64), {act}, t.nn.Linear(3, 2, dtype=t.float64))"
    elif op == "LayerNorm":
        params = {"weight": (k,), "bias": (k,)}
        make = f"t.nn.LayerNorm({k}, dtype=t.float64)"
    else:
        params = {"weight": (5, k)}
        make = f"t.nn.Embedding(5, {k}, dtype=t.float64)"
    text = f"{{out0}} = {make}\n{{out0}}.load_state_dict({_weights(g, params)})"
    m.info["params"] = list(params)
    g.emit("module", op, text, [], [m], grad_of=tuple("{out0}" + _attr(name) for name in params), mode=None)
    return m


def _attr(param: str) -> str:
    """The Python expression of a parameter under its module: "0.weight" is "[0].weight", "layers.0.w" is
    ".layers[0].w"."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in param.split("."))


def call_module(g: Generator, m: Var) -> Var:
    """m(x) for an input of the right width (a new leaf when none fits)."""
    if m.info["kind"] not in ("Linear", "Sequential", "LayerNorm", "Embedding"):
        from tests.fuzz.layer_kinds import call_layer
        return call_layer(g, m)
    k = m.info["in"]
    if m.info["kind"] == "Embedding":
        idx = [[int(i) for i in row] for row in g.rng.integers(0, 5, size=(2, 2))]
        out = Var(g.fresh(), (2, 2, k), "f64", rg=True, leaf=False, anc=frozenset({m.name}))
        g.emit("module", "call", f"{{out0}} = {{0}}(t.tensor({idx}))", [m], [out])
        return out
    x = g.pick(lambda v: v.dtype == "f64" and v.shape not in (None, ()) and v.shape[-1] == k and len(v.shape) > 1
               and (v.contiguous or len(v.shape) == 2 or g.s.known_gaps or "view_strides" not in KNOWN_GAPS))
    if x is None:
        x = g.leaf((2, k) if g.chance(0.85) or not g.allow("vecmat_version") else (k,), rg=g.chance(0.3))
    if len(x.shape) > 2 and not x.contiguous:
        g.allow("view_strides")
    out = g.derived(x.shape[:-1] + (m.info["out"],), "f64", x, m)
    out.rg, out.leaf, out.anc = True, False, out.anc | {m.name}
    out.noisy = out.noisy or m.info["kind"] == "LayerNorm"
    if m.info["kind"] in ("Linear", "Sequential") and len(x.shape) >= 3:
        # torch's linear views addmm's result back for a contiguous 3-D input, and otherwise goes through
        # matmul and add_: a write to the result behaves as one to a view, and the engine refuses it
        out.view, out.fake_view = True, True
    g.emit("module", "call", "{out0} = {0}({1})", [m, x], [out])
    return out


@kind("functional", 4)
def functional(g: Generator) -> None:
    """softmax, log_softmax, layer_norm, dropout (deterministic settings) and the losses, functional or
    as modules."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape not in (None, ())) or g.leaf((2, 3))
    op = g.weighted({"softmax": 2, "log_softmax": 1, "layer_norm": 1, "dropout": 0.5, "mse_loss": 2,
                     "l1_loss": 0.5, "cross_entropy": 1.5, "nll_loss": 0.5, "bce_logits": 0.7, "smooth_l1_loss": 0.5,
                     "huber_loss": 0.3, "bce": 0.5})
    d = int(g.rng.integers(-len(x.shape), len(x.shape)))
    k = x.shape[-1]
    if op == "layer_norm" and k == 1:  # see make_module: normalising one element is exactly 0 in the engine only
        op = "softmax"
    if op in ("softmax", "log_softmax"):
        text = g.pick_item([f"t.nn.functional.{op}({{0}}, dim={d})", f"{{0}}.{op}({d})", f"t.{op}({{0}}, {d})"])
        out = g.derived(x.shape, x.dtype, x, positive=op == "softmax")
        out.noisy = True  # a softmax's sums are exact only up to rounding: their grads are noise around 0
        g.emit("functional", op, "{out0} = " + text, [x], [out])
    elif op == "layer_norm":
        out = g.derived(x.shape, x.dtype, x)
        out.noisy = True
        g.emit("functional", op, f"{{out0}} = t.nn.functional.layer_norm({{0}}, ({k},))", [x], [out])
    elif op == "dropout":
        text = g.pick_item(["t.nn.functional.dropout({0}, 0.0)", "t.nn.functional.dropout({0}, 0.5, training=False)"])
        out = g.derived(x.shape, x.dtype, x, positive=x.positive)
        out.inference, out.kernel_version = x.inference, x.kernel_version  # both forms return `x` itself
        g.emit("functional", op, "{out0} = " + text, [x], [out])
    elif op in ("mse_loss", "l1_loss", "bce_logits", "smooth_l1_loss", "huber_loss", "bce"):
        _pointwise_loss(g, x, op)
    else:
        _class_loss(g, x, op)


def _pointwise_loss(g: Generator, x: Var, op: str) -> None:
    shape = x.shape
    if op == "mse_loss" and len(shape) >= 2 and g.chance(0.15) and g.allow("mse_loss_broadcast"):
        shape = shape[1:]
    target = g.leaf(shape, positive=op in ("bce_logits", "bce"), rg=g.chance(0.2))
    if op == "bce_logits":
        text = "t.nn.functional.binary_cross_entropy_with_logits({0}, {1}.clamp(max=1.0))"
    elif op == "bce":  # probabilities kept off 0 and 1, where a float32 rounding would flip the clamped log
        text = g.pick_item(["t.nn.functional.binary_cross_entropy({0}.sigmoid() * 0.5 + 0.25, {1}.clamp(max=1.0))",
                            't.nn.BCELoss(reduction="sum")({0}.sigmoid() * 0.5 + 0.25, {1}.clamp(max=1.0))'])
    elif op == "smooth_l1_loss":
        text = g.pick_item(["t.nn.functional.smooth_l1_loss({0}, {1})", "t.nn.SmoothL1Loss(beta=0.5)({0}, {1})",
                            't.nn.functional.smooth_l1_loss({0}, {1}, reduction="sum", beta=2.0)'])
    elif op == "huber_loss":
        text = g.pick_item(["t.nn.functional.huber_loss({0}, {1})", "t.nn.HuberLoss(delta=0.5)({0}, {1})"])
    elif op == "mse_loss":
        text = g.pick_item(["t.nn.functional.mse_loss({0}, {1})", "t.nn.MSELoss()({0}, {1})",
                            't.nn.functional.mse_loss({0}, {1}, reduction="sum")'])
    else:
        text = g.pick_item(["t.nn.functional.l1_loss({0}, {1})", 't.nn.L1Loss(reduction="sum")({0}, {1})'])
    rs = "none" in text
    g.emit("functional", op, "{out0} = " + text, [x, target], [g.derived(x.shape if rs else (), x.dtype, x, target)])


def _class_loss(g: Generator, x: Var, op: str) -> None:
    n = x.shape[0] if len(x.shape) == 2 else None
    c = x.shape[-1]
    if n is None:
        x = g.leaf((2, c))
        n = 2
    target = "t.tensor([" + ", ".join(str(int(i)) for i in g.rng.integers(0, c, size=n)) + "])"
    if op == "nll_loss":
        text = f"t.nn.functional.nll_loss({{0}}.log_softmax(1), {target})"
    else:
        text = g.pick_item([f"t.nn.functional.cross_entropy({{0}}, {target})",
                            f"t.nn.CrossEntropyLoss()({{0}}, {target})",
                            f't.nn.functional.cross_entropy({{0}}, {target}, reduction="sum")'])
    g.emit("functional", op, "{out0} = " + text, [x], [g.derived((), x.dtype, x)])


# -- optimizers -------------------------------------------------------------------------------------------------
_OPTIMIZERS = {"t.optim.SGD({params}, lr=0.1)": 3, "t.optim.SGD({params}, lr=0.1, momentum=0.9)": 1,
               "t.optim.SGD({params}, lr=0.05, momentum=0.5, nesterov=True)": 0.3,
               "t.optim.SGD({params}, lr=0.1, weight_decay=0.01)": 0.5, "t.optim.Adam({params}, lr=0.01)": 2,
               "t.optim.AdamW({params}, lr=0.01)": 0.7, "t.optim.RMSprop({params}, lr=0.01)": 0.5,
               "t.optim.Adagrad({params}, lr=0.1)": 0.5, "t.optim.Adadelta({params})": 0.3,
               "t.optim.Adadelta({params}, lr=0.5, weight_decay=0.01)": 0.2}


def make_optimizer(g: Generator) -> Var:
    """An optimizer over leaves that require grad, or over a module's parameters."""
    mods = [v for v in g.s.vars.values() if v.dtype == "module"]
    o = Var(g.fresh("o"), None, "optim")
    template = g.weighted(_OPTIMIZERS)
    if mods and g.chance(0.4):
        m = g.pick_item(mods)
        o.info = {"params": [], "module": m.name}
        g.emit("optim", "optimizer", "{out0} = " + template.format(params="{0}.parameters()"), [m], [o])
        return o
    # of a known shape: `train` makes its forward pass's input to fit the first (a masked leaf's shape is the data's)
    leaves = [v for v in g.s.vars.values() if v.leaf and v.rg and v.dtype in FLOAT and not v.is_view and
              v.shape is not None]
    if not leaves:
        leaves = [g.leaf(rg=True)]
    idx = g.rng.choice(len(leaves), size=min(len(leaves), int(g.rng.integers(1, 3))), replace=False)
    params = [leaves[int(i)] for i in sorted(idx)]
    o.info = {"params": [v.name for v in params]}
    refs = "[" + ", ".join(f"{{{i}}}" for i in range(len(params))) + "]"
    g.emit("optim", "optimizer", "{out0} = " + template.format(params=refs), params, [o])
    return o


def _step(g: Generator, o: Var) -> None:
    params = [g.s.vars[name] for name in o.info["params"] if name in g.s.vars]
    if not all(g.may_write(v) for v in params):
        return
    if any(v.kernel_version for v in params):  # its _version is torch's kernels' (DELIBERATE): shown without it
        shown = 'p.value("{tag} params", tuple({0}.param_groups[0]["params"]))'
    else:
        shown = 'p.made("{tag} params", *{0}.param_groups[0]["params"])'
    if g.chance(0.25) and not any(v.kernel_version or v.grad_rg for v in params):
        g.emit("optim", "clip", g.weighted(_CLIPS), [o], [])
    g.emit("optim", "step", "{0}.step()\n" + shown, [o], [])
    for v in params:
        g.wrote(v)
        v.positive = False
    if "module" in o.info:
        g.wrote(g.s.vars[o.info["module"]])
    if g.chance(0.2):  # a scheduler made and stepped once: the next step's learning rate is its
        g.emit("optim", "lr_scheduler", g.weighted(_SCHEDULERS), [o], [])


_GROUP = '{0}.param_groups[0]["params"]'
_CLIPS = {f'p.made("{{tag}} norm", t.nn.utils.clip_grad_norm_({_GROUP}, 0.5))': 2,
          f'p.made("{{tag}} norm", t.nn.utils.clip_grad_norm_({_GROUP}, 0.1, norm_type=float("inf")))': 0.5,
          f"t.nn.utils.clip_grad_value_({_GROUP}, 0.05)": 1}
"""Gradient clipping before a step: no node, and the grads written in place under no_grad."""
_LR = '\np.value("{tag} lr", {0}.param_groups[0]["lr"])'
_SCHEDULERS = {"t.optim.lr_scheduler.StepLR({0}, step_size=1, gamma=0.5).step()" + _LR: 1,
               "t.optim.lr_scheduler.ExponentialLR({0}, gamma=0.9).step()" + _LR: 1,
               "t.optim.lr_scheduler.CosineAnnealingLR({0}, T_max=3).step()" + _LR: 1}


@kind("optim", 3)
def optim(g: Generator) -> None:
    """Make an optimizer, step it, or zero its grads."""
    opts = [v for v in g.s.vars.values() if v.dtype == "optim"]
    if not opts:
        make_optimizer(g)
        return
    o = g.pick_item(opts)
    if g.chance(0.6):
        _step(g, o)
    else:
        _zero_grad(g, o, g.chance(0.7))


def _zero_grad(g: Generator, o: Var, to_none: bool) -> None:
    g.emit("optim", "zero_grad", "{0}.zero_grad()" if to_none else "{0}.zero_grad(set_to_none=False)", [o], [])
    for name in o.info["params"] if to_none else ():
        if name in g.s.vars:
            g.s.vars[name].has_grad = False


@kind("train", 3)
def train(g: Generator) -> None:
    """The everyday loop body: zero_grad, a forward pass, a loss, backward, step."""
    opts = [v for v in g.s.vars.values() if v.dtype == "optim"]
    o = g.pick_item(opts) if opts else make_optimizer(g)
    _zero_grad(g, o, True)
    if "module" in o.info:
        h = call_module(g, g.s.vars[o.info["module"]])
    else:
        w = g.s.vars[o.info["params"][0]]
        h = _forward(g, w)
    target = g.leaf(h.shape, rg=False)
    loss = g.derived((), h.dtype, h, target)
    text = g.pick_item(["(({0} - {1}) ** 2).mean()", "t.nn.functional.mse_loss({0}, {1})", "({0} - {1}).abs().sum()"])
    if h.noisy and "abs" in text:  # |h - target| where they tie up to rounding: the grad's sign is noise
        text = "t.nn.functional.mse_loss({0}, {1})"
    g.emit("train", "loss", "{out0} = " + text, [h, target], [loss])
    if all(g.allow(h) for h in hazards(g, loss)):
        _emit_backward(g, [loss], _watched("{0}") + "{0}.backward()", False, retain=False)
        _step(g, o)


def _forward(g: Generator, w: Var) -> Var:
    if len(w.shape) == 2 and g.chance(0.7):
        x = g.leaf((2, w.shape[0]), rg=False)
        h = g.derived((2, w.shape[1]), "f64", x, w)
        h.noisy = True  # see kinds._mm_out
        g.emit("matmul", "mm", "{out0} = {0} @ {1}", [x, w], [h])
    else:
        h = g.derived(w.shape, w.dtype, w)
        g.emit("binary", "mul", "{out0} = {0} * 2", [w], [h])
    act = g.pick_item(["tanh", "relu", "sigmoid", None])
    if act:
        out = g.derived(h.shape, h.dtype, h)
        g.emit("unary", act, f"{{out0}} = {{0}}.{act}()", [h], [out])
        h = out
    return h

