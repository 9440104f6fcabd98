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


# -- iteration and multi-output ops ------------------------------------------------------------------------
@program("iterate_rows_one_unbind")
def _iterate(t, p):
    x = p.leaf("x", A23)
    rows = [r for r in x]
    a, b = x
    p.counter("after iterating")
    y = rows[0] * 2 + b.exp()
    p.watch(y)
    p.run("backward", lambda: y.sum().backward())
    p.value("x.grad", x.grad)


_op("unbind", lambda t, a: t.stack([u * (i + 1) for i, u in enumerate(a.unbind(1))]), A23)
_op("unbind_one_used", lambda t, a: a.unbind(0)[1], A23)
_op("split", lambda t, a: a.split(2, 1)[1] * 2, A23)
_op("split_all", lambda t, a: t.cat(a.split(2, 1), 1), A23)
_op("split_sizes", lambda t, a: a.split([1, 2], 1)[0].exp(), A23)
_op("chunk", lambda t, a: a.chunk(2, 1)[0] + 1, A23)

# -- pointwise ---------------------------------------------------------------------------------------------
_op("clamp", lambda t, a: a.clamp(-1.0, 1.0), A23)
_op("clamp_min_kw", lambda t, a: a.clamp(min=0.0), A23)
_op("clamp_max_kw", lambda t, a: t.clamp(a, max=0.5), A23)
_op("clamp_min", lambda t, a: a.clamp_min(0.0), A23)
_op("clamp_max", lambda t, a: a.clamp_max(0.4), A23)
# clamp with tensor bounds (ClampBackward0, ClampMinBackward1, ClampMaxBackward1): broadcast both ways, ties
# with either bound (the grad goes to self), min > max (max wins), min == max.
LO3 = [0.0, -1.0, 1.0]
HI21 = [[1.0], [0.4]]
TIES = [[0.0, 1.0, 2.0, -1.0], [0.5, 0.5, 3.0, 2.0]]
TIE_LO = [0.0, 1.5, 2.0, -1.0]
TIE_HI = [[0.0, 1.0, 2.5, -2.0], [0.5, 0.5, 3.0, 2.0]]
_op("clamp_tensors", lambda t, a, lo, hi: a.clamp(lo, hi), A23, LO3, HI21)
_op("clamp_tensor_min_only", lambda t, a, lo: a.clamp(lo), A23, LO3)
_op("clamp_tensor_max_kw", lambda t, a, hi: t.clamp(a, max=hi), A23, HI21)
_op("clamp_tensor_none_min", lambda t, a, hi: a.clamp(None, hi), A23, HI21)
_op("clip_tensors", lambda t, a, lo, hi: t.clip(a, lo, hi), A23, LO3, HI21)
_op("clip_method_tensor", lambda t, a, lo: a.clip(min=lo), A23, LO3)
_op("clamp_tensor_ties", lambda t, a, lo, hi: a.clamp(lo, hi), TIES, TIE_LO, TIE_HI)
_op("clamp_tensor_bounds_wider", lambda t, a, lo: a.clamp(lo), V3, A23)
_op("clamp_min_tensor", lambda t, a, lo: a.clamp_min(lo), TIES, TIE_LO)
_op("clamp_max_tensor", lambda t, a, hi: t.clamp_max(a, hi), TIES, TIE_HI)
_op("clamp_min_tensor_wider", lambda t, a, lo: t.clamp_min(a, lo), V3, A23)
_op("clamp_max_tensor_0dim", lambda t, a, hi: a.clamp_max(hi), A23, 0.25)
_op("square", lambda t, a: a.square(), A23)
_op("log1p", lambda t, a: a.log1p(), POS23)
_op("expm1", lambda t, a: a.expm1(), A23)
_op("sign", lambda t, a: a.sign() * a, A23)
_op("neg_method", lambda t, a: a.neg(), A23)
_op("pow_method", lambda t, a: t.pow(a, 2), A23)

# -- reductions ----------------------------------------------------------------------------------------------
_op("min", lambda t, a: a.min(), A23)
_op("max_dim", lambda t, a: a.max(1).values, A23)
_op("max_dim_keepdim", lambda t, a: a.max(dim=0, keepdim=True)[0], A23)
_op("min_dim", lambda t, a: a.min(1).values, A23)
_op("var", lambda t, a: a.var(), A23)
_op("var_dim", lambda t, a: a.var(1), A23)
_op("var_unbiased_false", lambda t, a: a.var(0, unbiased=False), A23)
_op("var_keepdim", lambda t, a: a.var(1, keepdim=True), A23)
_op("var_1d_dim", lambda t, a: a.var(0), V3)
_op("std", lambda t, a: a.std(), A23)
_op("std_dim", lambda t, a: t.std(a, 0, keepdim=True), A23)
_op("logsumexp", lambda t, a: a.logsumexp(1), A23)
_op("logsumexp_keepdim", lambda t, a: t.logsumexp(a, 0, keepdim=True), A23)
_op("norm", lambda t, a: a.norm(), A23)
_op("norm_1", lambda t, a: a.norm(1), A23)
_op("norm_3", lambda t, a: a.norm(3, 1), A23)
_op("norm_1_5", lambda t, a: a.norm(1.5), A23)
_op("norm_dim", lambda t, a: a.norm(dim=1), A23)
_op("norm_dim_keepdim", lambda t, a: a.norm(2, 1, True), A23)
# p < 1, 0, inf and -inf, with zeros, an all-zero row and ties for the largest magnitude (torch's subgradients).
Z34 = [[0.0, -1.5, 2.0, 0.0], [1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 0.0, 0.0]]
INF = float("inf")
for _name, _p, _dim, _keep in (("0", 0, None, False), ("0_dim", 0, 1, False), ("half", 0.5, None, False),
                               ("half_dim", 0.5, 1, False), ("half_keepdim", 0.5, 0, True), ("neg1_dim", -1, 1, False),
                               ("neg_half", -0.5, 0, False), ("inf", INF, None, False), ("inf_dim", INF, 1, True),
                               ("inf_dim0", INF, 0, False), ("neg_inf", -INF, None, False),
                               ("neg_inf_dim", -INF, 1, False), ("1_zeros", 1, 1, False), ("1_5_zeros", 1.5, 1, False),
                               ("2_zero_row", 2, 1, False), ("3_zero_row", 3, 1, False),
                               ("inf_two_dims", INF, (0, 1), False),
                               ("half_two_dims", 0.5, [1, 0], True), ("half_empty_dims", 0.5, (), False)):
    _op(f"norm_{_name}", lambda t, a, _p=_p, _dim=_dim, _keep=_keep: a.norm(_p, _dim, _keep), Z34)
    _op(f"vector_norm_{_name}", lambda t, a, _p=_p, _dim=_dim, _keep=_keep: t.linalg.vector_norm(a, _p, _dim, _keep),
        Z34)
_op("norm_inf_no_zeros", lambda t, a: a.norm(INF, 1), A23)
_op("norm_neg_inf_no_zeros", lambda t, a: t.norm(a, p=-INF, dim=0), A23)
_op("norm_half_no_zeros", lambda t, a: a.norm(0.5), A23)
_op("norm_0_dim_0d", lambda t, a: t.linalg.vector_norm(a.sum(), INF, 0), A23)
_op("norm_fro_kw", lambda t, a: a.norm(p="fro", dim=(0, 1)), A23)
_op("norm_none_p", lambda t, a: a.norm(None, 1), A23)
_op("vector_norm_default", lambda t, a: t.linalg.vector_norm(a), A23)
_op("vector_norm_dtype", lambda t, a: t.linalg.vector_norm(a.float(), 3, dtype=t.float64), A23)
_op("norm_dtype", lambda t, a: a.float().norm(INF, dtype=t.float64), A23)

# -- selection and indexing ------------------------------------------------------------------------------------
_op("gather", lambda t, a: a.gather(1, t.tensor([[0, 0], [2, 1]])), A23)
_op("index_select", lambda t, a: a.index_select(1, t.tensor([0, 2, 0])), A23)
_op("index_bool_mask", lambda t, a: a[a > 0], A23)
_op("index_int_tensor", lambda t, a: a[t.tensor([1, 0, 1])], A23)
_op("index_int_list", lambda t, a: a[[1, 0]], A23)
_op("index_mixed", lambda t, a: a[:, t.tensor([2, 0])], A23)
_op("index_two_tensors", lambda t, a: a[t.tensor([0, 1]), t.tensor([2, 2])], A23)
_op("masked_fill", lambda t, a: a.masked_fill(a > 0, 0.0), A23)
_op("where_scalar_other", lambda t, a: t.where(a > 0, a, 0.0), A23)
_op("where_scalar_self", lambda t, a: t.where(a > 0, 1.0, a), A23)

# -- products ---------------------------------------------------------------------------------------------------
_op("bmm", lambda t, a, b: t.bmm(a, b), A234, B242)
_op("matmul_3d_3d", lambda t, a, b: a @ b, A234, B242)
_op("matmul_broadcast", lambda t, a, b: a[None] @ b[:1], A234, B242)
_op("matmul_3d_1d", lambda t, a, b: a @ b, A234, [0.5, -1.0, 0.3, 0.2])

# -- views and conversions --------------------------------------------------------------------------------------
_op("mT", lambda t, a: a.mT, A234)
_op("permute", lambda t, a: a.permute(2, 0, 1), A234)
_op("permute_tuple", lambda t, a: a.permute((1, 0)), A23)
_op("flatten", lambda t, a: a.flatten(), A234)
_op("flatten_dims", lambda t, a: a.flatten(1), A234)
_op("contiguous", lambda t, a: a.t().contiguous(), A23)
_op("float", lambda t, a: a.float(), A23)
_op("double_noop", lambda t, a: a.double() * 2, A23)
_op("type_as", lambda t, a: a.type_as(t.zeros(1)), A23)


@program("metadata")
def _metadata(t, p):
    x = p.leaf("x", A234)
    y = x.permute(2, 0, 1)
    p.value("meta", (x.numel(), x.dim(), tuple(x.size()), x.size(1), x.ndim, x.stride(), y.stride(),
                     x.is_contiguous(), y.is_contiguous(), y.contiguous().is_contiguous(), x.T.shape == (4, 3, 2)))
    d = x.data
    p.value("data", (d, d.requires_grad, d.grad_fn is None))
    p.value("item", x[0, 1, 2].item())
    p.counter("after")


@program("truth_and_comparison")
def _truth(t, p):
    x = p.leaf("x", A23)
    y = p.leaf("y", B23)
    for tag, f in (("lt", lambda: x < y), ("le", lambda: x <= 0.3), ("gt", lambda: x > y), ("ge", lambda: x >= y),
                   ("eq", lambda: x == x), ("ne", lambda: x != y), ("and", lambda: (x > 0) & (y > 0)),
                   ("or", lambda: (x > 0) | (y > 0)), ("xor", lambda: (x > 0) ^ (y > 0)),
                   ("not", lambda: t.logical_not(x > 0)), ("land", lambda: t.logical_and(x > 0, y > 0)),
                   ("lor", lambda: (x > 0).logical_or(y > 0)), ("lxor", lambda: t.logical_xor(x > 0, y > 0)),
                   ("any", lambda: (x > 1).any()), ("all", lambda: (x > -2).all()),
                   ("any_dim", lambda: (x > 1).any(1)), ("all_dim", lambda: (x > 0).all(0, keepdim=True)),
                   ("argmax", lambda: x.argmax(1)), ("argmin", lambda: x.argmin()),
                   ("argmin_dim", lambda: t.argmin(x, 0, keepdim=True)),
                   ("max_indices", lambda: x.max(1).indices), ("min_indices", lambda: x.min(0)[1]),
                   ("isclose", lambda: x.isclose(x + 1e-9)), ("isclose_fn", lambda: t.isclose(x, y)),
                   ("allclose", lambda: x.allclose(x + 1e-9)), ("allclose_no", lambda: t.allclose(x, y)),
                   ("equal", lambda: x.equal(x)), ("equal_no", lambda: t.equal(x, y))):
        r = p.run(tag, f)
        p.value(tag, r)
        p.counter(tag)


@program("surface_errors")
def _errors(t, p):
    x = p.leaf("x", A23)
    idx = p.const([0, 3], dtype="int64")
    for tag, f in (("clamp none", lambda: x.clamp()),
                   ("index out of range", lambda: x[idx]),
                   ("mask shape", lambda: x[p.const([True, False, True], dtype="bool")]),
                   ("split sizes", lambda: x.split([1, 1], 1)),
                   ("chunk zero", lambda: x.chunk(0)),
                   ("bmm 2d", lambda: t.bmm(x, x)),
                   ("unbind 0-dim", lambda: x.sum().unbind()),
                   ("iterate 0-dim", lambda: list(x.sum())),
                   ("item many", lambda: x.item()),
                   ("bool many", lambda: bool(x)),
                   ("mT 1-d", lambda: x[0].mT)):
        p.run(tag, f)
        p.counter(tag)
    s = x.sum()
    p.value("mT of 0-dim is the tensor itself", s.mT is s)


def _clamp_flags(name: str, build: Callable, flags: tuple, *data: Any) -> None:
    """A clamp program where only the leaves flagged in `flags` require grad."""
    def fn(t, p):
        leaves = [p.leaf(f"x{i}", d, requires_grad=f) for i, (d, f) in enumerate(zip(data, flags, strict=True))]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *[x for x in leaves if x.requires_grad])
    PROGRAMS[f"op_{name}"] = fn


_clamp_flags("clamp_tensor_self_only", lambda t, a, lo, hi: a.clamp(lo, hi), (True, False, False), A23, LO3, HI21)
_clamp_flags("clamp_tensor_bounds_only", lambda t, a, lo, hi: a.clamp(lo, hi), (False, True, True), A23, LO3, HI21)
_clamp_flags("clamp_tensor_max_only", lambda t, a, lo, hi: a.clamp(lo, hi), (False, False, True), A23, LO3, HI21)
_clamp_flags("clamp_min_tensor_bound_only", lambda t, a, lo: a.clamp_min(lo), (False, True), A23, LO3)


@program("clamp_tensor_promotion_and_nan")
def _clamp_promotion(t, p):
    """The result's dtype over self and both bounds (0-dim and dimensioned tiers), and NaN in self or a bound."""
    x = p.leaf("x", A23)
    for tag, f in (("f64 self, f32 bound", lambda: x.clamp(p.const(LO3, dtype="float32"))),
                   ("f32 self, f64 0-dim bound", lambda: p.const(V3, dtype="float32").clamp(p.const(0.0))),
                   ("f32 self, f64 bound", lambda: p.const(V3, dtype="float32").clamp_min(p.const(LO3))),
                   ("long self, float bounds", lambda: t.tensor([1, 5, -3]).clamp(p.const(LO3, dtype="float32"),
                                                                                  p.const(2.5))),
                   ("long self, long bounds", lambda: t.tensor([1, 5, -3]).clamp(t.tensor([0, 0, 0]), t.tensor(4))),
                   ("long self, f64 0-dim", lambda: t.tensor([1, 5, -3]).clamp_max(p.const(2.5))),
                   ("bool self", lambda: t.tensor([True, False]).clamp(t.tensor([False, True]))),
                   ("nan bound", lambda: x.clamp(p.const(float("nan")))),
                   ("nan in max", lambda: x.clamp(max=p.const([float("nan"), 0.0, 0.0]))),
                   ("nan self", lambda: p.const([float("nan"), 1.0]).clamp(p.const(0.0), p.const(0.5))),
                   ("min > max", lambda: x.clamp(p.const(1.0), p.const(0.0)))):
        r = p.run(tag, f)
        p.value(tag, r)
        p.counter(tag)


@program("clamp_tensor_saved")
def _clamp_saved(t, p):
    """The tensors ClampBackward0 and ClampMinBackward1 save (None for an absent bound)."""
    x = p.leaf("x", A23)
    lo = p.leaf("lo", LO3)
    y = x.clamp(lo)
    p.value("saved", (y.grad_fn._saved_self, y.grad_fn._saved_min, y.grad_fn._saved_max))
    z = x.clamp_min(lo)
    p.value("clamp_min saved", (z.grad_fn._saved_self, z.grad_fn._saved_min))
    w = x.clamp_max(p.const(HI21))
    p.value("clamp_max saved", (w.grad_fn._saved_self, w.grad_fn._saved_max))
    with t.no_grad():
        lo.add_(1.0)
    p.run("backward after the bound changed", lambda: y.sum().backward())


@program("clamp_tensor_errors")
def _clamp_errors(t, p):
    """Mixed number and tensor bounds are refused by the argument parser; both None, and bounds that do not
    broadcast, by the op (after its node took a seq_nr)."""
    x = p.leaf("x", A23)
    lo = p.leaf("lo", LO3)
    import numpy as np
    for tag, f in (("method number, tensor", lambda: x.clamp(0.0, lo)),
                   ("method tensor, number", lambda: x.clamp(lo, 1)),
                   ("method bool, tensor", lambda: x.clip(True, lo)),
                   ("method keywords", lambda: x.clamp(min=0.0, max=lo)),
                   ("method keywords reversed", lambda: x.clamp(max=1, min=lo)),
                   ("method positional and keyword", lambda: x.clamp(lo, max=1.0)),
                   ("method unknown keyword", lambda: x.clamp(1, foo=2)),
                   ("method three", lambda: x.clamp(lo, lo, lo)),
                   ("method str", lambda: x.clamp(lo, "a")),
                   ("method numpy", lambda: x.clamp(np.float64(1.0), lo)),
                   ("function", lambda: t.clamp(x, lo, 1)),
                   ("function keywords", lambda: t.clip(x, min=0.0, max=lo)),
                   ("function all keywords", lambda: t.clamp(input=x, min=lo, max=1)),
                   ("clamp_min None", lambda: x.clamp_min(None)),
                   ("clamp_min keyword None", lambda: x.clamp_min(min=None)),
                   ("clamp_min nothing", lambda: x.clamp_min()),
                   ("clamp_min two", lambda: x.clamp_min(lo, 1)),
                   ("clamp_max str", lambda: x.clamp_max("a")),
                   ("torch.clamp_min None", lambda: t.clamp_min(x, None)),
                   ("torch.clamp_max keyword", lambda: t.clamp_max(x, max="a")),
                   ("both None", lambda: x.clamp()),
                   ("both None given", lambda: x.clamp(None, None)),
                   ("function both None", lambda: t.clamp(x, None, max=None)),
                   ("bad shape", lambda: x.clamp(p.const([0.0, 1.0]))),
                   ("bad shape max", lambda: x.clamp(lo, p.const([0.0, 1.0]))),
                   ("clamp_min bad shape", lambda: t.clamp_min(x, p.const([[0.0], [1.0], [2.0]]))),
                   ("number bounds still", lambda: x.clamp(np.float32(0.0), 1))):
        p.run(tag, f)
        p.counter(tag)


@program("norm_errors")
def _norm_errors(t, p):
    """The argument checks of torch.norm and linalg.vector_norm, and the seq_nrs each takes before it refuses."""
    x = p.leaf("x", A23)
    e = p.leaf("e", [[], []])
    for tag, f in (("inf empty", lambda: e.norm(INF)), ("-inf empty", lambda: e.norm(-INF)),
                   ("-1 empty", lambda: t.linalg.vector_norm(e, -1)),
                   ("-0.5 empty dim 1", lambda: e.norm(-0.5, 1)), ("inf empty dim 0", lambda: e.norm(INF, 0)),
                   ("inf empty both dims", lambda: e.norm(INF, (0, 1))),
                   ("fro three dims", lambda: t.zeros(2, 2, 2).norm("fro", dim=(0, 1, 2))),
                   ("nuc three dims", lambda: t.zeros(2, 2, 2).norm("nuc", dim=(0, 1, 2))),
                   ("bogus order", lambda: x.norm("abc")), ("bogus order 3-d", lambda: t.zeros(2, 2, 2).norm("abc")),
                   ("long", lambda: t.tensor([1, 2]).norm(0.5)),
                   ("long dtype", lambda: t.tensor([1, 2]).norm(1, dtype=t.float64)),
                   ("repeated dim", lambda: x.norm(1, (0, 0))), ("repeated negative dim", lambda: x.norm(1, (1, -1))),
                   ("fro repeated dim", lambda: x.norm("fro", dim=(0, 0))),
                   ("dim out of range", lambda: t.linalg.vector_norm(x, 2, 3)),
                   ("norm dim out of range", lambda: x.norm(2, 3)),
                   ("ord str", lambda: t.linalg.vector_norm(x, "fro")), ("dim float", lambda: x.norm(2, dim=0.5)),
                   ("dtype narrowing", lambda: t.linalg.vector_norm(x, dtype=t.float32)),
                   ("dtype long", lambda: t.linalg.vector_norm(x, dtype=t.int64))):
        r = p.run(tag, f)
        p.value(tag, r)
        p.counter(tag)
    nan = p.const([float("nan"), 1.0])
    p.value("nan", (nan.norm(INF), nan.norm(-INF), nan.norm(0.5), nan.norm(0)))
    p.value("empty", (e.norm(0), e.norm(0.5), e.norm(INF, 0), t.linalg.vector_norm(e, 2, 1)))
    p.value("negative with zero", (x.norm(-1), p.const([0.0, 2.0]).norm(-2)))
    y = x.norm(0)
    p.watch(y)
    p.run("backward of the 0-norm", lambda: y.backward())
    p.value("x.grad", x.grad)


_CLAMPS_INPLACE = {
    "clamp_ numbers": lambda t, x, lo, hi: x.clamp_(0, 1),
    "clamp_ tensors": lambda t, x, lo, hi: x.clamp_(lo, hi),
    "clamp_ min tensor": lambda t, x, lo, hi: x.clamp_(lo),
    "clip_ tensors": lambda t, x, lo, hi: x.clip_(lo, hi),
    "clamp_min_ tensor": lambda t, x, lo, hi: x.clamp_min_(lo),
    "clamp_max_ number": lambda t, x, lo, hi: x.clamp_max_(0.5),
    "torch.clamp_ keyword": lambda t, x, lo, hi: t.clamp_(x, min=lo),
    "torch.clamp_max_ tensor": lambda t, x, lo, hi: t.clamp_max_(x, hi),
    "clamp_ constant bound": lambda t, x, lo, hi: x.clamp_(lo.detach()),
}


def _clamp_inplace_program(op: Callable) -> Callable:
    def fn(t, p):
        w = p.leaf("w", A23)
        lo = p.leaf("lo", LO3)
        hi = p.leaf("hi", HI21)
        x = w * 1
        y = op(t, x, lo, hi)
        p.value("returns self", (y is x, x._version))
        p.watch(x)
        p.counter("forward")
        grads = p.run("grad", lambda: t.autograd.grad(x.sum(), [w, lo, hi], allow_unused=True))
        p.value("grads", grads)
    return fn


for _tag, _f in _CLAMPS_INPLACE.items():
    PROGRAMS[f"inplace_{_tag.replace(' ', '_')}"] = _clamp_inplace_program(_f)


@program("clamp_inplace_errors")
def _clamp_inplace_errors(t, p):
    """In-place clamps on a leaf, into a smaller shape, with mixed bounds, with no bound, without grad."""
    w = p.leaf("w", V3)
    lo = p.leaf("lo", LO3)
    for tag, f in (("leaf", lambda: w.clamp_(0, 1)), ("leaf tensor bound", lambda: w.clamp_min_(lo)),
                   ("broadcast into smaller", lambda: (w * 1).clamp_(p.const([LO3, LO3]))),
                   ("method mixed", lambda: (w * 1).clamp_(0.0, lo)),
                   ("function mixed", lambda: t.clamp_(w * 1, 0.0, lo)),
                   ("function clip_ mixed", lambda: t.clip_(w * 1, lo, 1)),
                   ("clamp_min_ None", lambda: (w * 1).clamp_min_(None)),
                   ("torch.clamp_min_ None", lambda: t.clamp_min_(w * 1, None)),
                   ("torch.clamp_max_ str", lambda: t.clamp_max_(w * 1, "a")),
                   ("no bound", lambda: (w * 1).clamp_()),
                   ("long self, float bound", lambda: t.tensor([1, 2, 3]).clamp_(p.const(LO3))),
                   ("no grad", lambda: p.value("no grad", p.const(V3).clamp_(lo.detach(), 1.0 + lo.detach())))):
        p.run(tag, f)
        p.counter(tag)
