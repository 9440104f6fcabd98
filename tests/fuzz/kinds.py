"""The statement kinds the generator draws, each a function of the Generator registered with its weight.

Weights favour everyday code: elementwise arithmetic and activations, matmul, sums, views and indexing,
backward and optimizer steps. Each function draws one statement (or a short everyday sequence), keeps the
abstract state of what it made, and marks a KNOWN_GAPS construct with `g.allow(...)` before using it.

Imports numpy, the standard library and the generator only.
"""
from __future__ import annotations

import dataclasses

from tests.fuzz.generator import FLOAT, Generator, Var, broadcast, kind, numel

# -- elementwise ---------------------------------------------------------------------------------------------
# op: (templates, domain, result); domain "pos" needs positive input; result "pos" is always positive,
# "keep" is positive when the input is.
UNARY: dict[str, tuple[tuple[str, ...], str, str, float]] = {
    "exp": (("{0}.exp()", "t.exp({0})"), "any", "pos", 3),
    "log": (("{0}.log()", "t.log({0})"), "pos", "", 2),
    "sin": (("{0}.sin()", "t.sin({0})"), "any", "", 1),
    "cos": (("{0}.cos()",), "any", "", 1),
    "tanh": (("{0}.tanh()", "t.tanh({0})", "t.nn.functional.tanh({0})"), "any", "", 3),
    "sigmoid": (("{0}.sigmoid()", "t.sigmoid({0})"), "any", "pos", 3),
    "relu": (("{0}.relu()", "t.relu({0})", "t.nn.functional.relu({0})"), "any", "", 4),
    "leaky_relu": (("t.nn.functional.leaky_relu({0})", "t.nn.functional.leaky_relu({0}, 0.2)",
                    "t.nn.LeakyReLU(0.3)({0})"), "any", "", 1),
    "gelu": (("t.nn.functional.gelu({0})", 't.nn.functional.gelu({0}, approximate="tanh")'), "any", "", 1),
    "sqrt": (("{0}.sqrt()", "t.sqrt({0})"), "pos", "pos", 1),
    "abs": (("{0}.abs()", "abs({0})"), "any", "", 1),
    "sgn": (("{0}.sgn()",), "any", "", 0.3),
    "sign": (("{0}.sign()",), "any", "", 0.3),
    "log1p": (("{0}.log1p()",), "pos", "pos", 0.5),
    "log10": (("{0}.log10()", "t.log10({0})"), "pos", "", 0.5),
    "sinh": (("{0}.sinh()", "t.sinh({0})"), "any", "", 0.3),
    "cosh": (("{0}.cosh()", "t.cosh({0})"), "any", "pos", 0.3),
    "flip": (("{0}.flip(0)", "{0}.flip(-1)", "t.flip({0}, (0,))", "{0}.flip(())"), "any", "keep", 0.5),
    "expm1": (("{0}.expm1()",), "any", "keep", 0.5),
    "square": (("{0}.square()", "{0} ** 2", "{0}.pow(2)", "t.pow({0}, 2)"), "any", "keep", 3),
    "cube": (("{0} ** 3",), "any", "keep", 0.5),
    "pow_frac": (("{0} ** 0.5", "{0}.pow(-1)", "{0} ** -0.5"), "pos", "pos", 0.5),
    "neg": (("-{0}", "{0}.neg()"), "any", "", 2),
    "reciprocal": (("{0}.reciprocal()", "1 / {0}"), "pos", "pos", 1),
    "clamp": (("{0}.clamp(-0.5, 0.8)", "{0}.clamp(min=-1.0)", "t.clamp({0}, max=0.5)", "{0}.clip(-1, 1)"),
              "any", "", 1),
    "clamp_min": (("{0}.clamp_min(0.2)", "{0}.clamp(min=0.25)"), "any", "pos", 1),
    "clamp_max": (("{0}.clamp_max(0.4)",), "any", "", 0.5),
    "scale": (("{0} * 2", "{0} / 2", "{0} * 0.5", "0.1 * {0}"), "any", "keep", 3),
    "shift": (("{0} + 1", "{0} - 0.5", "1 - {0}", "2 + {0}", "{0} + 1.0"), "any", "", 3),
    "rdiv": (("2 / {0}", "1.0 / {0}"), "pos", "pos", 0.5),
    "rpow": (("2 ** {0}", "1.5 ** {0}", "{0}.exp() ** 2"), "any", "pos", 0.3),
    "clone": (("{0}.clone()", "t.clone({0})"), "any", "keep", 1),
    "detach": (("{0}.detach()",), "any", "keep", 1),
    "float": (("{0}.float()", "{0}.to(t.float32)"), "any", "keep", 0.4),
    "double": (("{0}.double()", "{0}.to(t.float64)"), "any", "keep", 0.4),
}

SAVES_OUTPUT = {"exp", "tanh", "sigmoid", "relu", "sqrt", "expm1", "reciprocal", "rdiv", "pow_frac", "rpow",
                "gelu", "sgn", "log_softmax", "softmax", "logsumexp", "norm", "std", "max", "min", "amax", "amin",
                "OnceExp"}
"""Ops whose backward node keeps their output: writing to the output in place makes backward fail."""

BINARY: dict[str, tuple[tuple[str, ...], float]] = {
    "add": (("{0} + {1}", "{0}.add({1})", "{0}.add({1}, alpha=2)"), 5),
    "sub": (("{0} - {1}", "{0}.sub({1})", "{0}.sub({1}, alpha=0.5)"), 3),
    "mul": (("{0} * {1}", "{0}.mul({1})"), 5),
    "div": (("{0} / {1}", "{0}.div({1})"), 2),
    "pow": (("{0} ** {1}", "{0}.pow({1})", "t.pow({0}, {1})"), 0.5),
    "maximum": (("t.maximum({0}, {1})", "{0}.maximum({1})"), 0.5),
}


@kind("unary", 12)
def unary(g: Generator) -> None:
    """An elementwise function of one tensor, or of one tensor and a Python scalar."""
    x = g.pick_float(lambda v: v.positive, make_positive=True) if g.chance(0.3) else g.pick_float()
    ops = {k: w for k, (_, dom, _, w) in UNARY.items() if dom == "any" or x.positive}
    if g.chance(0.02) and g.allow("nan_values") and not x.noisy:  # noise around 0: nan on one side only
        ops = {"log": 1, "sqrt": 1}  # on purpose outside the domain: nan, seen by anomaly mode
    op = g.weighted(ops)
    if op == "sgn" and not g.allow("sgn_saved"):
        op = "sign"
    if (x.big and op in ("sin", "cos", "sinh", "cosh")) or (x.noisy and op in ("sign", "sgn", "abs")):
        op = "tanh"  # a huge argument (or sinh's overflow), or a sign of rounding noise, would compare noise
    forms, _, result, _ = UNARY[op]
    text = g.pick_item(list(forms))
    dtype = "f32" if op == "float" else "f64" if op == "double" else x.dtype
    pos = result == "pos" or (result == "keep" and x.positive)
    if op == "detach":  # shares the storage and the version counter, without history
        out = g.alias(x)
    elif op == "double" and x.dtype == "f64":  # the same tensor object
        out = dataclasses.replace(x, name=g.fresh(), saw=dict(x.saw), info={})
    else:
        out = g.derived(x.shape, dtype, x, positive=pos, saves_output=op in SAVES_OUTPUT)
        out.big = out.big or op in ("exp", "expm1")
    g.emit("unary", op, "{out0} = " + text, [x], [out])


@kind("binary", 14)
def binary(g: Generator) -> None:
    """Two tensors (broadcasting), or a tensor and a Python scalar on either side."""
    op = g.weighted({k: w for k, (_, w) in BINARY.items()})
    a = g.pick_float(lambda v: v.positive, make_positive=True) if op == "pow" else g.pick_float()
    b = _partner(g, a, positive=op in ("div", "pow"))
    shape = broadcast(a.shape, b.shape)
    dtype = "f64" if "f64" in (a.dtype, b.dtype) else "f32"
    pos = op in ("add", "mul", "div", "pow", "maximum") and a.positive and b.positive
    if op == "pow":
        b_text = g.pick_item(list(BINARY[op][0]))
        out = g.derived(shape, dtype, a, b, positive=True, saves_output=True)
        out.big = True  # x ** (y * 0.5) of values up to 64 (a cube): sin of it would compare rounding noise
        g.emit("binary", op, "{out0} = " + b_text.replace("{1}", "({1} * 0.5)"), [a, b], [out])
        return
    if g.chance(0.5) and a.shape is not None and b.shape is not None and _fits(a, b):
        a, b = (b, a) if g.chance(0.5) and op != "div" else (a, b)
    out = g.derived(shape, dtype, a, b, positive=pos)
    if op == "sub" and a.root and a.root == b.root:  # x - x[i]: exact zeros whose grads are sums that cancel
        out.noisy = True
    g.emit("binary", op, "{out0} = " + g.pick_item(list(BINARY[op][0])), [a, b], [out])


def _fits(a: Var, b: Var) -> bool:
    return broadcast(a.shape, b.shape) is not None


def _partner(g: Generator, a: Var, positive: bool = False) -> Var:
    """A tensor that broadcasts with `a`: often one already made, else a new leaf or constant."""
    if g.chance(0.6):
        b = g.pick(lambda v: v.dtype in FLOAT and v.shape is not None and (v.positive or not positive)
                   and broadcast(a.shape, v.shape) is not None)
        if b is not None:
            return b
    shape = a.shape
    choices = [shape, shape[1:], (1,) + shape[1:] if shape else (), shape[:-1] + (1,) if shape else (), ()]
    return g.leaf(g.pick_item(choices), positive=positive or None, rg=g.chance(0.5))


# -- reductions ----------------------------------------------------------------------------------------------
@kind("reduce", 8)
def reduce(g: Generator) -> None:
    """sum, mean, max/min (whole, or along a dim with values and indices), amax/amin (dims as an int or a tuple),
    argmax, var, std, logsumexp, norm; numpy's axis=/keepdims= names now and then."""
    x = g.pick_float(lambda v: True)
    nd = len(x.shape)
    op = g.weighted({"sum": 6, "mean": 4, "max": 1.5, "min": 0.7, "argmax": 0.4, "var": 0.6, "std": 0.4,
                     "logsumexp": 0.6, "norm": 0.8, "amax": 0.8, "amin": 0.4})
    if x.noisy and op in ("argmax", "max", "min", "amax", "amin"):  # which element wins would be rounding noise
        op = "sum"
    if nd == 0 or g.chance(0.4) and op not in ("logsumexp",):
        _reduce_all(g, x, op)
        return
    d = int(g.rng.integers(-nd, nd))
    keep = g.chance(0.3)
    shape = _reduced(x.shape, d, keep)
    kd = g.pick_item([", keepdim=True", ", keepdims=True"]) if keep else ""
    if op in ("max", "min"):
        _max_dim(g, x, op, d, kd, shape)
        return
    if op == "argmax":
        g.emit("reduce", op, f"{{out0}} = {{0}}.argmax({d}{kd})", [x], [g.derived(shape, "i64", x)])
        return
    text = {"sum": f"{{0}}.sum({d}{kd})", "mean": f"{{0}}.mean(dim={d}{kd})", "var": f"{{0}}.var({d}{kd})",
            "std": f"{{0}}.std(dim={d}{kd})", "logsumexp": f"{{0}}.logsumexp({d}{kd})",
            "norm": f"{{0}}.norm(dim={d}{kd})", "amax": f"{{0}}.amax({d}{kd})",
            "amin": g.pick_item([f"{{0}}.amin(axis={d}{kd})", f"t.amin({{0}}, {d}{kd})"])}[op]
    if op == "sum" and g.chance(0.2):
        text = f"{{0}}.sum(axis={d}{kd})"
    if op in ("sum", "amax") and nd >= 2 and g.chance(0.3):
        text, shape = f"{{0}}.{op}((0, 1))", x.shape[2:]
    if op == "var" and x.shape[d] < 2:
        op, text = "sum", f"{{0}}.sum({d}{kd})"
    out = g.derived(shape, x.dtype, x, positive=op == "sum" and x.positive, saves_output=op in SAVES_OUTPUT)
    out.fake_view = op in ("logsumexp", "amax", "amin")
    g.emit("reduce", op, "{out0} = " + text, [x], [out])


def _reduced(shape: tuple[int, ...], d: int, keep: bool) -> tuple[int, ...]:
    d %= len(shape)
    return shape[:d] + ((1,) if keep else ()) + shape[d + 1:]


def _reduce_all(g: Generator, x: Var, op: str) -> None:
    if op == "argmax":
        g.emit("reduce", op, "{out0} = {0}.argmax()", [x], [g.derived((), "i64", x)])
        return
    if op == "logsumexp" or (op == "var" and numel(x.shape or ()) < 2) or (op == "std" and numel(x.shape) < 2):
        op = "sum"
    text = {"sum": g.pick_item(["{0}.sum()", "t.sum({0})"]), "mean": g.pick_item(["{0}.mean()", "t.mean({0})"]),
            "max": "{0}.max()", "min": "{0}.min()", "var": "{0}.var()", "std": "{0}.std()",
            "norm": g.pick_item(["{0}.norm()", "{0}.norm(p=1)", "t.norm({0})"]),
            "amax": g.pick_item(["{0}.amax()", "t.amax({0})"]), "amin": "{0}.amin()"}[op]
    out = g.derived((), x.dtype, x, positive=x.positive and op in ("sum", "mean", "max", "min", "amax", "amin"),
                    saves_output=op in SAVES_OUTPUT)
    g.emit("reduce", op, "{out0} = " + text, [x], [out])


def _max_dim(g: Generator, x: Var, op: str, d: int, kd: str, shape: tuple[int, ...]) -> None:
    values_, idx = g.derived(shape, x.dtype, x, saves_output=True), g.derived(shape, "i64", x)
    values_.fake_view = True
    form = int(g.rng.integers(3))
    if form == 0:
        g.emit("reduce", op, f"{{out0}}, {{out1}} = {{0}}.{op}({d}{kd})", [x], [values_, idx])
    else:
        attr = ".values" if form == 1 else "[0]"
        g.emit("reduce", op, f"{{out0}} = {{0}}.{op}(dim={d}{kd}){attr}", [x], [values_])


# -- views ------------------------------------------------------------------------------------------------
@kind("view", 9)
def view(g: Generator) -> None:
    """view, reshape, flatten, transpose, t, permute, select, basic indexing, unsqueeze, squeeze, expand,
    *_as, unbind, split, chunk, .T and .mT."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape is not None) or g.leaf()
    in_mode = g.s.mode and (x.rg or (g.s.mode == "inference_mode" and not x.inference))
    if in_mode and not g.allow("view_under_no_grad"):
        g.s.mode = None
    nd = len(x.shape)
    ops = {"view": 2, "reshape": 2, "flatten": 1, "unsqueeze": 2, "getitem": 5, "expand": 1}
    if nd >= 1:
        ops.update({"select": 1.5, "unbind": 0.8, "split": 0.6, "chunk": 0.5, "squeeze": 0.5})
    if nd >= 2:
        ops.update({"transpose": 2, "t": 1.5 if nd == 2 else 0, "permute": 1, "mT": 0.5, "T": 0.5 if nd == 2 else 0})
    VIEWS[g.weighted(ops)](g, x)


def _emit_view(g: Generator, op: str, text: str, x: Var, shape: tuple[int, ...], contiguous: bool,
               extra: list[Var] | None = None) -> Var | None:
    if shape == () and x.shape != () and not g.allow("zero_dim_view"):
        return None
    out = g.derived(shape, x.dtype, x, *(extra or []), positive=x.positive, view_of=x)
    out.contiguous = contiguous and x.contiguous
    g.emit("view", op, "{out0} = " + text, [x] + (extra or []), [out])
    return out


def _reshape_target(g: Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    n = numel(shape)
    options = [(n,), (1, n), shape + (1,), (1,) + shape]
    if len(shape) >= 2:
        options.append(shape[:-2] + (shape[-2] * shape[-1],))
        options.append((shape[0], -1))
    if n % 2 == 0 and n > 2:
        options += [(2, n // 2), (n // 2, 2)]
    if n == 12:
        options += [(3, 4), (2, 2, 3)]
    return g.pick_item(options)


def _view_op(g: Generator, x: Var) -> None:
    if not x.contiguous and not g.allow("view_strides"):
        _flatten(g, x) if x.contiguous else _unsqueeze(g, x)
        return
    target = _reshape_target(g, x.shape)
    shape = tuple(numel(x.shape) // -numel(target) if s == -1 else s for s in target)
    args = ", ".join(map(str, target)) if target else ""
    _emit_view(g, "view", g.pick_item([f"{{0}}.view({args})", f"{{0}}.view({target})"]), x, shape, True)


def _reshape(g: Generator, x: Var) -> None:
    if not x.contiguous and not g.allow("view_strides"):
        _unsqueeze(g, x)
        return
    target = _reshape_target(g, x.shape)
    shape = tuple(numel(x.shape) // -numel(target) if s == -1 else s for s in target)
    args = ", ".join(map(str, target))
    text = g.pick_item([f"{{0}}.reshape({args})", f"t.reshape({{0}}, {target})"])
    out = _emit_view(g, "reshape", text, x, shape, True)
    if out is not None and not x.contiguous:  # a copy in torch, unless x's layout lets it view (a grad's may)
        out.view, out.root, out.fake_view, out.maybe_root = False, out.name, True, x.root


def _flatten(g: Generator, x: Var) -> None:
    if not x.contiguous and len(x.shape) > 1 and not g.allow("view_strides"):
        _unsqueeze(g, x)
        return
    if len(x.shape) >= 2 and g.chance(0.4):
        _emit_view(g, "flatten", "{0}.flatten(1)", x, x.shape[:1] + (numel(x.shape[1:]),), True)
    else:
        _emit_view(g, "flatten", g.pick_item(["{0}.flatten()", "t.flatten({0})"]), x, (numel(x.shape),), True)


def _unsqueeze(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(-len(x.shape) - 1, len(x.shape) + 1))
    shape = list(x.shape)
    shape.insert(d % (len(x.shape) + 1), 1)
    _emit_view(g, "unsqueeze", g.pick_item([f"{{0}}.unsqueeze({d})", f"t.unsqueeze({{0}}, {d})"]), x,
               tuple(shape), True)


def _squeeze(g: Generator, x: Var) -> None:
    ones = [i for i, s in enumerate(x.shape) if s == 1]
    if ones and g.chance(0.6):
        d = g.pick_item(ones)
        _emit_view(g, "squeeze", f"{{0}}.squeeze({d})", x, x.shape[:d] + x.shape[d + 1:], True)
    else:
        _emit_view(g, "squeeze", "{0}.squeeze()", x, tuple(s for s in x.shape if s != 1), True)


def _select(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    i = int(g.rng.integers(-x.shape[d], x.shape[d]))
    text = g.pick_item([f"{{0}}.select({d}, {i})", f"{{0}}[{', '.join([':'] * d + [str(i)])}]"])
    _emit_view(g, "select", text, x, x.shape[:d] + x.shape[d + 1:], d == 0)


def _getitem(g: Generator, x: Var) -> None:
    parts, shape, contiguous = [], [], True
    for d, n in enumerate(x.shape[: int(g.rng.integers(1, len(x.shape) + 1)) if x.shape else 0]):
        kind_ = g.weighted({"int": 3, "slice": 3, "full": 1.5, "step": 0.5})
        if kind_ == "int":
            parts.append(str(int(g.rng.integers(-n, n))))
            contiguous = contiguous and d == 0
            continue
        if kind_ == "full":
            parts.append(":")
            shape.append(n)
            continue
        lo = int(g.rng.integers(0, n))
        hi = int(g.rng.integers(lo + 1, n + 1))
        step = 2 if kind_ == "step" else 1
        parts.append(f"{lo or ''}:{hi if hi < n else ''}" + (":2" if step == 2 else ""))
        shape.append(len(range(lo, hi, step)))
        contiguous = contiguous and d == 0 and step == 1
    if g.chance(0.15):
        parts.insert(int(g.rng.integers(len(parts) + 1)), "None")
        shape.insert(parts.index("None"), 1)
    if not parts or g.chance(0.05):
        parts = ["..."] if g.chance(0.5) or not x.shape else [":"]
    shape += list(x.shape[len([p for p in parts if p not in ("None", "...")]):])
    if parts == ["..."]:
        shape = list(x.shape)
    if _is_full_slice(parts, x.shape) and not g.allow("full_slice"):
        _unsqueeze(g, x)
        return
    _emit_view(g, "getitem", "{0}[" + ", ".join(parts) + "]", x, tuple(shape), contiguous)


def _is_full_slice(parts: list[str], shape: tuple[int, ...]) -> bool:
    """x[:] or x[0:n] (alone or with :, on the leading dims): the key PyTorch records as SliceBackward0."""
    return any(p in (":", "0:") or p == "" for p in parts if ":" in p) and all(":" in p for p in parts)


def _transpose(g: Generator, x: Var) -> None:
    nd = len(x.shape)
    d0, d1 = (int(d) for d in g.rng.choice(nd, size=2, replace=False))
    shape = list(x.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    text = g.pick_item([f"{{0}}.transpose({d0}, {d1})", f"t.transpose({{0}}, {d0}, {d1})"])
    _emit_view(g, "transpose", text, x, tuple(shape), False)


def _t(g: Generator, x: Var) -> None:
    _emit_view(g, "t", g.pick_item(["{0}.t()", "t.t({0})"]), x, x.shape[::-1], False)


def _big_t(g: Generator, x: Var) -> None:
    _emit_view(g, "T", "{0}.T", x, x.shape[::-1], False)


def _mt(g: Generator, x: Var) -> None:
    _emit_view(g, "mT", "{0}.mT", x, x.shape[:-2] + (x.shape[-1], x.shape[-2]), False)


def _permute(g: Generator, x: Var) -> None:
    perm = [int(d) for d in g.rng.permutation(len(x.shape))]
    text = g.pick_item([f"{{0}}.permute({', '.join(map(str, perm))})", f"{{0}}.permute({tuple(perm)})"])
    _emit_view(g, "permute", text, x, tuple(x.shape[d] for d in perm), perm == sorted(perm))


def _expand(g: Generator, x: Var) -> None:
    if g.chance(0.5) or not x.shape:
        target = (2,) + x.shape
    else:
        target = tuple(3 if s == 1 else s for s in x.shape)
    args = ", ".join(map(str, target))
    if g.chance(0.3):
        other = g.leaf(target, rg=False)
        out = _emit_view(g, "expand_as", "{0}.expand_as({1})", x, target, False, [other])
    else:
        out = _emit_view(g, "expand", f"{{0}}.expand({args})", x, target, False)
    if out is not None:
        out.expanded = True


def _unbind(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    n = x.shape[d]
    if n > 4:
        _select(g, x)
        return
    shape = x.shape[:d] + x.shape[d + 1:]
    _multi(g, "unbind", g.pick_item([f"{{0}}.unbind({d})", f"t.unbind({{0}}, {d})"]), x, [shape] * n, d == 0)


def _split(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    n = x.shape[d]
    k = int(g.rng.integers(1, n + 1))
    sizes = [min(k, n - i) for i in range(0, n, k)]
    if len(sizes) > 4:
        _select(g, x)
        return
    shapes = [x.shape[:d] + (s,) + x.shape[d + 1:] for s in sizes]
    _multi(g, "split", f"{{0}}.split({k}, {d})", x, shapes, d == 0)


def _chunk(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    n = x.shape[d]
    c = int(g.rng.integers(1, 4))
    per = -(-n // c)
    sizes = [min(per, n - i) for i in range(0, n, per)]
    shapes = [x.shape[:d] + (s,) + x.shape[d + 1:] for s in sizes]
    _multi(g, "chunk", f"{{0}}.chunk({c}, {d})", x, shapes, d == 0)


def _multi(g: Generator, op: str, text: str, x: Var, shapes: list, contiguous: bool) -> None:
    if () in shapes and not g.allow("zero_dim_view"):
        return
    outs = []
    for shape in shapes:
        v = g.derived(shape, x.dtype, x, positive=x.positive, view_of=x)
        v.contiguous = contiguous and x.contiguous
        outs.append(v)
    names = ", ".join(f"{{out{k}}}" for k in range(len(outs)))
    g.emit("view", op, f"{names}{',' if len(outs) == 1 else ''} = {text}", [x], outs)


VIEWS = {"view": _view_op, "reshape": _reshape, "flatten": _flatten, "unsqueeze": _unsqueeze,
         "squeeze": _squeeze, "select": _select, "getitem": _getitem, "transpose": _transpose, "t": _t,
         "T": _big_t, "mT": _mt, "permute": _permute, "expand": _expand, "unbind": _unbind, "split": _split,
         "chunk": _chunk}


# -- indexing -----------------------------------------------------------------------------------------------
@kind("index", 4)
def index(g: Generator) -> None:
    """Integer-tensor and mask indexing, gather, index_select, where and masked_fill."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape not in (None, ())) or g.leaf((2, 3))
    op = g.weighted({"index": 2, "mask": 1.5, "gather": 1, "index_select": 1, "where": 2, "masked_fill": 1.5})
    INDEXING[op](g, x)


def _ints(g: Generator, n: int, k: int) -> str:
    return "t.tensor([" + ", ".join(str(int(i)) for i in g.rng.integers(0, n, size=k)) + "])"


def _mask(g: Generator, shape: tuple[int, ...]) -> tuple[str, int]:
    """A written-out boolean mask with at least one True (an empty one as `t.tensor([])` is float32, which
    `where` refuses after taking a seq_nr: a known gap)."""
    m = g.rng.random(shape) < 0.5
    if 0 in shape and not g.allow("failed_op_seq"):
        return "t.tensor([], dtype=t.bool)", 0
    if m.size and not m.any():
        m.flat[int(g.rng.integers(m.size))] = True
    return f"t.tensor({m.tolist()})", int(m.sum())


def _index(g: Generator, x: Var) -> None:
    k = int(g.rng.integers(1, 4))
    if len(x.shape) >= 2 and g.chance(0.4):  # the engine's result is not contiguous where torch's is: strides
        text, shape = f"{{0}}[:, {_ints(g, x.shape[1], k)}]", (x.shape[0], k) + x.shape[2:]
        out = _copy(g, shape, x, contiguous=False)
        out.fake_view = True  # refused as a view by the engine
        g.emit("index", "index", "{out0} = " + text, [x], [out])
    elif x.shape[0] and g.chance(0.2):  # a range indexes as the list of its ints (never empty: see _split)
        lo = int(g.rng.integers(0, x.shape[0]))
        hi = int(g.rng.integers(lo + 1, x.shape[0] + 1))
        text, shape = f"{{0}}[range({lo}, {hi})]", (hi - lo,) + x.shape[1:]
        g.emit("index", "index", "{out0} = " + text, [x], [_copy(g, shape, x)])
    else:
        text, shape = f"{{0}}[{_ints(g, x.shape[0], k)}]", (k,) + x.shape[1:]
        g.emit("index", "index", "{out0} = " + text, [x], [_copy(g, shape, x)])


def _copy(g: Generator, shape, x: Var, contiguous: bool = True) -> Var:
    """The result of advanced indexing: a new tensor (IndexBackward0 and the like)."""
    out = g.derived(shape, x.dtype, x, positive=x.positive)
    out.indexed, out.contiguous = True, contiguous
    return out


def _mask_index(g: Generator, x: Var) -> None:
    if g.chance(0.4) and not x.noisy:  # a noisy value's sign is rounding noise
        g.emit("index", "mask", "{out0} = {0}[{0} > 0]", [x], [_copy(g, None, x)])
        return
    mask, count = _mask(g, x.shape)
    g.emit("index", "mask", f"{{out0}} = {{0}}[{mask}]", [x], [_copy(g, (count,), x)])


def _gather(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    idx = g.rng.integers(0, x.shape[d], size=x.shape)
    text = g.pick_item([f"{{0}}.gather({d}, t.tensor({idx.tolist()}))",
                        f"t.gather({{0}}, {d}, t.tensor({idx.tolist()}))"])
    g.emit("index", "gather", "{out0} = " + text, [x], [_copy(g, x.shape, x)])


def _index_select(g: Generator, x: Var) -> None:
    d = int(g.rng.integers(len(x.shape)))
    k = int(g.rng.integers(1, 4))
    shape = x.shape[:d] + (k,) + x.shape[d + 1:]
    g.emit("index", "index_select", f"{{out0}} = {{0}}.index_select({d}, {_ints(g, x.shape[d], k)})", [x],
           [_copy(g, shape, x)])


def _where(g: Generator, x: Var) -> None:
    other = _partner(g, x)
    shape = broadcast(x.shape, other.shape)
    written = _mask(g, x.shape)[0]
    cond = written if x.noisy or other.noisy else g.pick_item(["{0} > 0", "{1} < {0}", written])
    if g.chance(0.05) and g.allow("failed_op_seq"):
        cond = "{0}"  # a float condition: torch refuses it after taking a seq_nr
    out = g.derived(shape, "f64" if "f64" in (x.dtype, other.dtype) else "f32", x, other)
    out.fake_view = True
    if g.chance(0.3):
        out = g.derived(x.shape, x.dtype, x)
        out.fake_view = True
        g.emit("index", "where", f"{{out0}} = t.where({cond.replace('{1}', '0.5')}, {{0}}, 0.0)", [x], [out])
        return
    g.emit("index", "where", f"{{out0}} = t.where({cond}, {{0}}, {{1}})", [x, other], [out])


def _masked_fill(g: Generator, x: Var) -> None:
    written = _mask(g, x.shape)[0]
    cond = written if x.noisy else g.pick_item(["{0} < 0", written])
    g.emit("index", "masked_fill", f"{{out0}} = {{0}}.masked_fill({cond}, 0.5)", [x],
           [g.derived(x.shape, x.dtype, x)])


INDEXING = {"index": _index, "mask": _mask_index, "gather": _gather, "index_select": _index_select,
            "where": _where, "masked_fill": _masked_fill}


# -- matmul ---------------------------------------------------------------------------------------------------
@kind("matmul", 6)
def matmul(g: Generator) -> None:
    """mm, mv, dot, matmul and @ (1-D to 3-D), bmm, addmm and F.linear, often against a new weight leaf."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape is not None and 1 <= len(v.shape) <= 3) or g.leaf((2, 3))
    nd = len(x.shape)
    if nd == 1:
        _matmul_1d(g, x)
    elif nd == 2:
        _matmul_2d(g, x)
    else:
        _matmul_3d(g, x)


def _weight(g: Generator, shape: tuple[int, ...], dtype: str) -> Var:
    w = g.pick(lambda v: v.shape == shape and v.dtype in FLOAT) if g.chance(0.4) else None
    if w is None and g.chance(0.05) and g.allow("mixed_dtype_matmul"):
        return g.leaf(shape, dtype="f32")
    return w or g.leaf(shape)


def _mm_out(g: Generator, shape, *ins: Var) -> Var:
    out = g.derived(shape, "f64" if any(v.dtype == "f64" for v in ins) else "f32", *ins)
    out.noisy = True  # BLAS sums in another order than numpy: a product that ties a written value ties up to rounding
    return out


def _matmul_1d(g: Generator, x: Var) -> None:
    n = x.shape[0]
    op = g.weighted({"dot": 2, "vecmat": 1 if g.allow("vecmat_version") else 0, "mv": 1})
    if op == "dot":
        y = _weight(g, (n,), x.dtype)
        text = g.pick_item(["{0} @ {1}", "{0}.dot({1})", "t.dot({0}, {1})", "t.matmul({0}, {1})"])
        g.emit("matmul", "dot", "{out0} = " + text, [x, y], [_mm_out(g, (), x, y)])
    elif op == "vecmat":
        w = _weight(g, (n, 2), x.dtype)
        g.emit("matmul", "vecmat", "{out0} = {0} @ {1}", [x, w], [_mm_out(g, (2,), x, w)])
    else:
        m = _weight(g, (2, n), x.dtype)
        text = g.pick_item(["{0}.mv({1})", "t.mv({0}, {1})", "{0} @ {1}"])
        g.emit("matmul", "mv", "{out0} = " + text, [m, x], [_mm_out(g, (2,), m, x)])


def _matmul_2d(g: Generator, x: Var) -> None:
    n, k = x.shape
    op = g.weighted({"mm": 4, "linear": 3, "addmm": 1, "mv": 1, "tmm": 1})
    if op == "mm":
        w = _weight(g, (k, int(g.rng.integers(1, 4))), x.dtype)
        text = g.pick_item(["{0} @ {1}", "{0}.mm({1})", "t.mm({0}, {1})", "t.matmul({0}, {1})", "{0}.matmul({1})"])
        g.emit("matmul", "mm", "{out0} = " + text, [x, w], [_mm_out(g, (n, w.shape[1]), x, w)])
    elif op == "linear":
        m = int(g.rng.integers(1, 4))
        w, b = _weight(g, (m, k), x.dtype), g.leaf((m,), dtype=x.dtype)
        text = g.pick_item(["t.nn.functional.linear({0}, {1}, {2})", "{0} @ {1}.t() + {2}"])
        g.emit("matmul", "linear", "{out0} = " + text, [x, w, b], [_mm_out(g, (n, m), x, w, b)])
    elif op == "addmm":
        w, b = _weight(g, (k, 2), x.dtype), g.leaf((2,), dtype=x.dtype)
        g.emit("matmul", "addmm", "{out0} = t.addmm({2}, {0}, {1})", [x, w, b], [_mm_out(g, (n, 2), x, w, b)])
    elif op == "mv":
        v = _weight(g, (k,), x.dtype)
        g.emit("matmul", "mv", "{out0} = {0} @ {1}", [x, v], [_mm_out(g, (n,), x, v)])
    else:
        w = _weight(g, (n, 2), x.dtype)
        op = "mT_mm" if g.chance(0.5) and g.allow("view_strides") else "t_mm"
        text = "{0}.mT @ {1}" if op == "mT_mm" else "{0}.t() @ {1}"
        g.emit("matmul", op, "{out0} = " + text, [x, w], [_mm_out(g, (k, 2), x, w)])


def _matmul_3d(g: Generator, x: Var) -> None:
    b, n, k = x.shape
    if not x.contiguous and not g.allow("view_strides"):
        return
    if g.chance(0.5):
        w = _weight(g, (b, k, 2), x.dtype)
        text = g.pick_item(["t.bmm({0}, {1})", "{0}.bmm({1})", "{0} @ {1}"])
        out = _mm_out(g, (b, n, 2), x, w)
        out.fake_view = "@" in text
        g.emit("matmul", "bmm", "{out0} = " + text, [x, w], [out])
    else:
        w = _weight(g, (k, 2), x.dtype)
        out = _mm_out(g, (b, n, 2), x, w)
        out.fake_view = True
        g.emit("matmul", "matmul_3d", "{out0} = {0} @ {1}", [x, w], [out])


# -- cat and stack ------------------------------------------------------------------------------------------------
@kind("combine", 3)
def combine(g: Generator) -> None:
    """cat and stack of two or three tensors."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape not in (None, ())) or g.leaf((2, 3))
    others = [g.pick(lambda v, x=x: v.shape == x.shape and v.dtype in FLOAT) or g.leaf(x.shape)
              for _ in range(int(g.rng.integers(1, 3)))]
    ins = [x] + others
    if not all(v.contiguous for v in ins):
        g.allow("view_strides")  # the engine's result keeps an odd layout where torch's is contiguous
    refs = ", ".join(f"{{{i}}}" for i in range(len(ins)))
    d = int(g.rng.integers(len(x.shape)))
    if g.chance(0.5):
        shape = x.shape[:d] + (x.shape[d] * len(ins),) + x.shape[d + 1:]
        out = _mm_out(g, shape, *ins)
        out.contiguous = all(v.contiguous for v in ins)
        g.emit("combine", "cat", f"{{out0}} = t.cat([{refs}], {d})", ins, [out])
    else:
        shape = x.shape[:d] + (len(ins),) + x.shape[d:]
        out = _mm_out(g, shape, *ins)
        out.contiguous = all(v.contiguous for v in ins)
        g.emit("combine", "stack", f"{{out0}} = t.stack([{refs}], dim={d})", ins, [out])



@kind("data", 0.6)
def data(g: Generator) -> None:
    """A batch from a DataLoader over a TensorDataset, in order: rows selected one by one, then stacked."""
    x = g.pick(lambda v: v.dtype in FLOAT and v.shape not in (None, ()) and v.shape[0] > 0) or g.leaf((3, 2))
    n, b = x.shape[0], int(g.rng.integers(1, 4))
    drop = g.chance(0.3)
    batches = [min(b, n - k) for k in range(0, n, b) if not (drop and n - k < b)]
    if not batches:  # every row dropped: take the loader without drop_last
        drop, batches = False, [min(b, n)]
    k = int(g.rng.integers(len(batches)))
    out = g.derived((batches[k],) + x.shape[1:], x.dtype, x)
    loader = f"t.utils.data.DataLoader(t.utils.data.TensorDataset({{0}}), batch_size={b}, drop_last={drop})"
    g.emit("data", "DataLoader", f"{{out0}} = list({loader})[{k}][0]", [x], [out])
