"""Every differentiable op of the engine, checked against central finite differences in float64.

First order: each input is a float64 leaf; the scalar `(op(...) * w).sum()`, with `w` a fixed random
weight (so every output element matters), is differentiated by `.backward()` (or `autograd.grad`) and
each input's gradient is compared with a central difference computed on the numpy data, evaluating the
same op with the engine under `engine.no_grad()`.

Second order: `g = autograd.grad((f(x) * w).sum(), x, create_graph=True)`, then
`autograd.grad((g * v).sum(), x)` is compared with central differences of `(g(x) * v).sum()`, where each
evaluation of `g` builds a fresh graph.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agdb.engine.nn.functional as F
from agdb import engine
from tests.strategies import (
    arrays,
    arrays_of,
    away_from_zero,
    broadcastable_array_pairs,
    broadcastable_shape_pairs,
    dims_of,
    floats,
    positive,
    shapes,
)

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-5


# -- helpers ----------------------------------------------------------------------------------------------
def leaf(a: np.ndarray, requires_grad: bool = True) -> engine.Tensor:
    """A float64 leaf tensor holding a copy of `a`."""
    return engine.tensor(np.asarray(a, dtype=np.float64), dtype=engine.float64, requires_grad=requires_grad)


def fixed_weights(shape: tuple, salt: str = "") -> np.ndarray:
    """Deterministic weights for `shape`, |w| in [0.5, 1.5] with random signs, so no element is ignored."""
    rng = np.random.default_rng(zlib.crc32(repr((tuple(shape), salt)).encode()))
    mag = rng.uniform(0.5, 1.5, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return np.asarray(mag * sign, dtype=np.float64)


def to_numpy(t: engine.Tensor) -> np.ndarray:
    return np.array(t.detach().numpy(), dtype=np.float64, copy=True)


def _weighted_value(f, arrays_: list, w: np.ndarray) -> float:
    """sum(f(*arrays) * w), evaluated by the engine without recording."""
    with engine.no_grad():
        out = f(*[leaf(a, requires_grad=False) for a in arrays_])
    return float(np.sum(to_numpy(out) * w))


def central_difference(phi, arrays_: list, i: int, eps: float = EPS) -> np.ndarray:
    """d phi(arrays) / d arrays[i], element by element, by (phi(x + eps) - phi(x - eps)) / (2 eps)."""
    work = [np.array(a, dtype=np.float64, copy=True) for a in arrays_]
    x = work[i]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        orig = x[idx]
        x[idx] = orig + eps
        plus = phi(work)
        x[idx] = orig - eps
        minus = phi(work)
        x[idx] = orig
        grad[idx] = (plus - minus) / (2 * eps)
    return grad


def check_gradients(f, *arrays_: np.ndarray, wrt=None, via: str = "backward", rtol: float = RTOL,
                    atol: float = ATOL) -> None:
    """Compare the engine's gradient of sum(f(*inputs) * w) w.r.t. inputs[wrt] with central differences."""
    arrays_ = [np.asarray(a, dtype=np.float64) for a in arrays_]
    wrt = tuple(range(len(arrays_))) if wrt is None else tuple(wrt)
    inputs = [leaf(a, requires_grad=i in wrt) for i, a in enumerate(arrays_)]
    out = f(*inputs)
    assert out.dtype == engine.float64, f"op changed dtype to {out.dtype}"
    assert out.requires_grad, "output of a differentiable op on leaves that require grad must require grad"
    w = fixed_weights(tuple(out.shape))
    loss = (out * leaf(w, requires_grad=False)).sum()
    if via == "backward":
        loss.backward()
        grads = [inputs[i].grad for i in wrt]
    else:
        grads = list(engine.autograd.grad(loss, [inputs[i] for i in wrt]))
    for i, g in zip(wrt, grads):
        assert g is not None, f"input {i} got no gradient"
        assert tuple(g.shape) == arrays_[i].shape, f"input {i}: grad shape {tuple(g.shape)} != {arrays_[i].shape}"
        assert g.dtype == engine.float64, f"input {i}: grad dtype {g.dtype}"
        numeric = central_difference(lambda arrs: _weighted_value(f, arrs, w), arrays_, i)
        np.testing.assert_allclose(to_numpy(g), numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i} (shape {arrays_[i].shape})")


def check_second_order(f, *arrays_: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Hessian-vector products through create_graph=True against central differences of the gradient."""
    arrays_ = [np.asarray(a, dtype=np.float64) for a in arrays_]
    with engine.no_grad():
        out_shape = tuple(f(*[leaf(a, requires_grad=False) for a in arrays_]).shape)
    w = leaf(fixed_weights(out_shape), requires_grad=False)
    vs = [fixed_weights(a.shape, salt=f"v{i}") for i, a in enumerate(arrays_)]

    def first_grads(arrs: list, create_graph: bool):
        xs = [leaf(a) for a in arrs]
        with engine.enable_grad():
            gs = engine.autograd.grad((f(*xs) * w).sum(), xs, create_graph=create_graph)
        return xs, gs

    xs, gs = first_grads(arrays_, create_graph=True)
    total = None
    for g, v in zip(gs, vs):
        term = (g * leaf(v, requires_grad=False)).sum()
        total = term if total is None else total + term
    assert total.requires_grad, "first-order grads built with create_graph=True carry no graph"
    hvps = engine.autograd.grad(total, xs, allow_unused=True)

    def phi(arrs: list) -> float:
        _, g1 = first_grads(arrs, create_graph=False)
        return float(sum(np.sum(to_numpy(g) * v) for g, v in zip(g1, vs)))

    for i, (a, hvp) in enumerate(zip(arrays_, hvps)):
        analytic = np.zeros_like(a) if hvp is None else to_numpy(hvp)
        assert analytic.shape == a.shape
        with engine.no_grad():  # the outer perturbation records nothing; phi re-enables grad inside
            numeric = central_difference(phi, arrays_, i)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"second-order gradient w.r.t. input {i} (shape {a.shape})")


def grid(lo: int = -300, hi: int = 300, step: float = 0.01, offset: float = 0.0):
    """Floats on a grid k*step + offset: distinct grid points are at least `step` apart (no near ties)."""
    return st.integers(lo, hi).map(lambda k: k * step + offset)


# -- binary arithmetic between tensors, with broadcasting --------------------------------------------------
BINARY = {
    "add": (lambda a, b: a + b, floats(), floats()),
    "sub": (lambda a, b: a - b, floats(), floats()),
    "mul": (lambda a, b: a * b, floats(), floats()),
    "div": (lambda a, b: a / b, floats(), away_from_zero(0.5)),
    "pow": (lambda a, b: a ** b, positive(0.5), floats(-2.0, 2.0)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_tensor_tensor_broadcast(name, data):
    """`a op b` for + - * / ** between tensors of numpy-broadcastable shapes: both grads sum-reduce correctly."""
    op, ea, eb = BINARY[name]
    a, b = data.draw(broadcastable_array_pairs(elements=[ea, eb]), label="a, b")
    check_gradients(op, a, b)


BINARY_METHODS = {
    "add": (lambda a, b: a.add(b), floats(), floats()),
    "sub": (lambda a, b: a.sub(b), floats(), floats()),
    "mul": (lambda a, b: a.mul(b), floats(), floats()),
    "div": (lambda a, b: a.div(b), floats(), away_from_zero(0.5)),
    "pow": (lambda a, b: a.pow(b), positive(0.5), floats(-2.0, 2.0)),
    "engine.pow": (lambda a, b: engine.pow(a, b), positive(0.5), floats(-2.0, 2.0)),
}


@pytest.mark.parametrize("name", sorted(BINARY_METHODS))
@given(data=st.data())
def test_binary_method_forms(name, data):
    """The method / function spellings (a.add(b), a.pow(b), engine.pow(a, b), ...) give the same correct grads."""
    op, ea, eb = BINARY_METHODS[name]
    a, b = data.draw(broadcastable_array_pairs(elements=[ea, eb]), label="a, b")
    check_gradients(op, a, b)


@given(a=arrays_of())
def test_same_tensor_on_both_sides(a):
    """A tensor used several times in one expression accumulates every contribution to its grad."""
    check_gradients(lambda x: x * x + x - x * 3.0 + x * x * x, a)


# -- arithmetic with Python scalars --------------------------------------------------------------------------
SCALAR_OPS = {
    "x+2": (lambda x: x + 2, floats()),
    "2+x": (lambda x: 2 + x, floats()),
    "x+2.5": (lambda x: x + 2.5, floats()),
    "x-2": (lambda x: x - 2, floats()),
    "2-x": (lambda x: 2 - x, floats()),
    "1.5-x": (lambda x: 1.5 - x, floats()),
    "x*2": (lambda x: x * 2, floats()),
    "2*x": (lambda x: 2 * x, floats()),
    "-0.5*x": (lambda x: -0.5 * x, floats()),
    "x/2": (lambda x: x / 2, floats()),
    "x/0.3": (lambda x: x / 0.3, floats()),
    "2/x": (lambda x: 2 / x, away_from_zero(0.3)),
    "-1.5/x": (lambda x: -1.5 / x, away_from_zero(0.3)),
    "x**2": (lambda x: x ** 2, floats()),
    "x**3": (lambda x: x ** 3, floats()),
    "x**1": (lambda x: x ** 1, floats()),
    "x**0": (lambda x: x ** 0, floats()),
    "x**-1": (lambda x: x ** -1, away_from_zero(0.3)),
    "x**0.5": (lambda x: x ** 0.5, positive(0.1)),
    "x**2.5": (lambda x: x ** 2.5, positive(0.1)),
    "2**x": (lambda x: 2 ** x, floats()),
    "0.5**x": (lambda x: 0.5 ** x, floats()),
    "2.5**x": (lambda x: 2.5 ** x, floats()),
}


@pytest.mark.parametrize("name", list(SCALAR_OPS))
@given(data=st.data())
def test_scalar_operand(name, data):
    """Arithmetic with a Python number on either side (x+2, 2-x, 2/x, x**2, 2**x, ...) has the right grad."""
    op, elements = SCALAR_OPS[name]
    x = data.draw(arrays_of(elements=elements), label="x")
    check_gradients(op, x)


# -- unary pointwise ops -------------------------------------------------------------------------------------
UNARY = {
    "neg": (lambda x: -x, floats()),
    "neg()": (lambda x: x.neg(), floats()),
    "exp": (lambda x: x.exp(), floats()),
    "engine.exp": (lambda x: engine.exp(x), floats()),
    "log": (lambda x: x.log(), positive(0.1)),
    "engine.log": (lambda x: engine.log(x), positive(0.1)),
    "sin": (lambda x: x.sin(), floats()),
    "engine.sin": (lambda x: engine.sin(x), floats()),
    "cos": (lambda x: x.cos(), floats()),
    "engine.cos": (lambda x: engine.cos(x), floats()),
    "tanh": (lambda x: x.tanh(), floats()),
    "F.tanh": (lambda x: F.tanh(x), floats()),
    "sigmoid": (lambda x: x.sigmoid(), floats()),
    "F.sigmoid": (lambda x: F.sigmoid(x), floats()),
    "relu": (lambda x: x.relu(), away_from_zero(1e-3)),
    "F.relu": (lambda x: F.relu(x), away_from_zero(1e-3)),
    "sqrt": (lambda x: x.sqrt(), positive(0.1)),
    "engine.sqrt": (lambda x: engine.sqrt(x), positive(0.1)),
    "abs": (lambda x: x.abs(), away_from_zero(1e-3)),
    "abs(x)": (lambda x: abs(x), away_from_zero(1e-3)),
    "pow(2)": (lambda x: x.pow(2), floats()),
    "pow(3)": (lambda x: x.pow(3), floats()),
    "pow(1.5)": (lambda x: x.pow(1.5), positive(0.1)),
    "pow(-2)": (lambda x: x.pow(-2), away_from_zero(0.3)),
    "engine.pow(x, 3)": (lambda x: engine.pow(x, 3), floats()),
    "reciprocal": (lambda x: x.reciprocal(), away_from_zero(0.3)),
}


@pytest.mark.parametrize("name", list(UNARY))
@given(data=st.data())
def test_unary(name, data):
    """Unary ops (-x, exp, log, sin, cos, tanh, sigmoid, relu, sqrt, abs, pow) match finite differences."""
    op, elements = UNARY[name]
    x = data.draw(arrays_of(elements=elements), label="x")
    check_gradients(op, x)


# -- reductions ----------------------------------------------------------------------------------------------
def _dim_arg(ndim: int):
    """An int dim, or (for ndim >= 2) a tuple of distinct dims, possibly negative."""
    single = dims_of(ndim)
    if ndim < 2:
        return single
    many = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).flatmap(
        lambda ds: st.tuples(*[st.sampled_from([d, d - ndim]) for d in ds]))
    return st.one_of(single, many)


@given(x=arrays_of())
def test_sum_all(x):
    """x.sum() spreads the upstream grad to every element."""
    check_gradients(lambda t: t.sum(), x)


@given(x=arrays_of())
def test_mean_all(x):
    """x.mean() spreads grad / numel to every element."""
    check_gradients(lambda t: t.mean(), x)


@given(data=st.data())
def test_sum_dim(data):
    """x.sum(dim, keepdim) (int or tuple dims, negative dims, keepdim both ways) broadcasts the grad back."""
    x = data.draw(arrays_of(), label="x")
    dim = data.draw(_dim_arg(x.ndim), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check_gradients(lambda t: t.sum(dim, keepdim=keepdim), x)


@given(data=st.data())
def test_mean_dim(data):
    """x.mean(dim, keepdim) (int or tuple dims, negative dims, keepdim both ways) divides by the reduced count."""
    x = data.draw(arrays_of(), label="x")
    dim = data.draw(_dim_arg(x.ndim), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check_gradients(lambda t: t.mean(dim, keepdim=keepdim), x)


@given(data=st.data())
def test_reduction_function_forms(data):
    """engine.sum(x, dim, keepdim) and engine.mean(x, dim, keepdim) match the method forms' grads."""
    x = data.draw(arrays_of(shapes(min_dims=1)), label="x")
    dim = data.draw(dims_of(x.ndim), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check_gradients(lambda t: engine.sum(t, dim, keepdim) * 2 + engine.mean(t, dim, keepdim), x)


@given(x=arrays_of(elements=grid()))
def test_max_all_no_ties(x):
    """x.max() (no ties) sends the whole grad to the single largest element."""
    x = np.array(x)
    x.flat[int(np.argmax(x))] += 0.5  # a unique maximum, at least 0.5 above the rest
    check_gradients(lambda t: t.max(), x)
    check_gradients(lambda t: engine.max(t), x)


@given(data=st.data())
def test_max_dim_no_ties(data):
    """x.max(dim, keepdim).values (no ties) routes each grad to its row's largest element."""
    x = data.draw(arrays(shapes(min_dims=1), elements=grid(), unique=True), label="x")
    dim = data.draw(dims_of(x.ndim), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check_gradients(lambda t: t.max(dim, keepdim=keepdim).values, x)
    check_gradients(lambda t: engine.max(t, dim, keepdim)[0], x)


@pytest.mark.parametrize("keepdim", [False, True], ids=["keepdim=False", "keepdim=True"])
@pytest.mark.parametrize("dim", [0, -1])
def test_max_dim_of_zero_dim_tensor(dim, keepdim):
    """x.max(dim) on a 0-dim tensor (allowed by PyTorch: dim 0 / -1) passes the grad straight through."""
    check_gradients(lambda t: t.max(dim, keepdim=keepdim).values, np.array(1.5))


@given(data=st.data())
def test_maximum_no_ties(data):
    """engine.maximum(a, b) with broadcasting and no ties: each element's grad goes to the larger input."""
    a, b = data.draw(broadcastable_array_pairs(elements=[grid(step=0.02), grid(step=0.02, offset=0.01)]),
                     label="a, b")
    check_gradients(lambda s, t: engine.maximum(s, t), a, b)
    check_gradients(lambda s, t: s.maximum(t), a, b)


# -- linear algebra ------------------------------------------------------------------------------------------
def _matmul_shapes(case: str, n: int, k: int, m: int, b: int) -> tuple[tuple, tuple]:
    return {
        "2d@2d": ((n, k), (k, m)),
        "1d@1d": ((k,), (k,)),
        "2d@1d": ((n, k), (k,)),
        "1d@2d": ((k,), (k, m)),
        "3d@2d": ((b, n, k), (k, m)),
        "3d@1d": ((b, n, k), (k,)),
    }[case]


MATMUL_FORMS = {
    "@": lambda a, b: a @ b,
    "matmul": lambda a, b: a.matmul(b),
    "engine.matmul": lambda a, b: engine.matmul(a, b),
}

_side = st.integers(1, 4)


@pytest.mark.parametrize("form", list(MATMUL_FORMS))
@pytest.mark.parametrize("case", ["2d@2d", "1d@1d", "2d@1d", "1d@2d", "3d@2d", "3d@1d"])
@given(n=_side, k=_side, m=_side, b=_side, data=st.data())
def test_matmul(case, form, n, k, m, b, data):
    """matmul / @ dispatch (dot, mv, mm, 1-D@2-D, folded 3-D@2-D) gives the right grads to both operands."""
    sa, sb = _matmul_shapes(case, n, k, m, b)
    a = data.draw(arrays(sa), label="a")
    bb = data.draw(arrays(sb), label="b")
    check_gradients(MATMUL_FORMS[form], a, bb)


@given(n=_side, k=_side, m=_side, b=_side, data=st.data())
def test_matmul_non_contiguous_3d(n, k, m, b, data):
    """A transposed (non-contiguous) 3-D @ 2-D / 1-D folds through reshape's copy with the right grads."""
    a = data.draw(arrays((n, b, k)), label="a")
    mat = data.draw(arrays((k, m)), label="b")
    vec = data.draw(arrays((k,)), label="v")
    check_gradients(lambda s, t: s.transpose(0, 1) @ t, a, mat)
    check_gradients(lambda s, t: s.transpose(0, 1) @ t, a, vec)


MM_FORMS = {
    "mm": lambda a, b: a.mm(b),
    "engine.mm": lambda a, b: engine.mm(a, b),
    "a.t() mm b": lambda a, b: a.t().mm(b),
    "a mm b.t()": lambda a, b: a.mm(b.t()),
    "a.t() @ b.t()": lambda a, b: a.t() @ b.t(),
}


@pytest.mark.parametrize("form", list(MM_FORMS))
@given(n=_side, k=_side, m=_side, data=st.data())
def test_mm(form, n, k, m, data):
    """mm of 2-D tensors, including transposed (column-major) operands, has the right grads."""
    sa = (k, n) if form.startswith("a.t()") else (n, k)
    sb = (m, k) if "b.t()" in form else (k, m)
    a = data.draw(arrays(sa), label="a")
    b = data.draw(arrays(sb), label="b")
    check_gradients(MM_FORMS[form], a, b)


@given(k=_side, n=_side, data=st.data())
def test_dot_and_mv(k, n, data):
    """engine.dot(a, b) and engine.mv(M, v) have the right grads."""
    a = data.draw(arrays((k,)), label="a")
    b = data.draw(arrays((k,)), label="b")
    mat = data.draw(arrays((n, k)), label="M")
    check_gradients(lambda s, t: engine.dot(s, t), a, b)
    check_gradients(lambda s, t: engine.mv(s, t), mat, b)


# -- shape ops -----------------------------------------------------------------------------------------------
@given(x=arrays_of(shapes(max_dims=2)))
def test_t(x):
    """x.t() and engine.t(x) (0-, 1- and 2-D) transpose the grad back."""
    check_gradients(lambda a: a.t(), x)
    check_gradients(lambda a: engine.t(a), x)


@given(x=arrays_of())
def test_T_property(x):
    """x.T reverses all dims (PermuteBackward0) and the grad is permuted back."""
    check_gradients(lambda a: a.T, x)


@given(data=st.data())
def test_transpose(data):
    """x.transpose(0, 1) and transpose(d0, d1) with any (negative) dims swap the grad back."""
    x = data.draw(arrays_of(shapes(min_dims=2)), label="x")
    d0 = data.draw(dims_of(x.ndim), label="d0")
    d1 = data.draw(dims_of(x.ndim), label="d1")
    check_gradients(lambda a: a.transpose(0, 1), x)
    check_gradients(lambda a: a.transpose(d0, d1), x)
    check_gradients(lambda a: engine.transpose(a, d0, d1), x)


@given(data=st.data())
def test_transpose_low_dim(data):
    """transpose(d0, d1) of a 0-D or 1-D tensor (dims -1 / 0) is the identity, grad included."""
    x = data.draw(arrays_of(shapes(max_dims=1)), label="x")
    d0 = data.draw(dims_of(x.ndim), label="d0")
    d1 = data.draw(dims_of(x.ndim), label="d1")
    check_gradients(lambda a: a.transpose(d0, d1), x)


def _same_numel_shape(shape: tuple):
    """Another shape with the same number of elements: a permutation of the sizes with 1s inserted."""
    @st.composite
    def _draw(draw):
        sizes = list(draw(st.permutations(list(shape)))) if shape else []
        for _ in range(draw(st.integers(0, 2))):
            sizes.insert(draw(st.integers(0, len(sizes))), 1)
        if sizes and draw(st.booleans()):
            sizes[draw(st.integers(0, len(sizes) - 1))] = -1
        return tuple(sizes)

    return _draw()


@given(data=st.data())
def test_view(data):
    """x.view(shape) (with -1 and inserted 1s) and x.view(-1) reshape the grad back."""
    x = data.draw(arrays_of(), label="x")
    new = data.draw(_same_numel_shape(x.shape), label="shape")
    check_gradients(lambda a: a.view(new), x)
    check_gradients(lambda a: a.view(*new) if new else a.view(()), x)
    check_gradients(lambda a: a.view(-1), x)


@given(data=st.data())
def test_reshape(data):
    """x.reshape(shape) and engine.reshape of a contiguous tensor reshape the grad back."""
    x = data.draw(arrays_of(), label="x")
    new = data.draw(_same_numel_shape(x.shape), label="shape")
    check_gradients(lambda a: a.reshape(new), x)
    check_gradients(lambda a: engine.reshape(a, new), x)


@given(data=st.data())
def test_reshape_non_contiguous(data):
    """reshape of a transposed (non-contiguous) tensor copies (clone + _unsafe_view) with the right grad."""
    x = data.draw(arrays_of(shapes(min_dims=2)), label="x")
    transposed = tuple(np.swapaxes(np.empty(x.shape), 0, 1).shape)
    new = data.draw(_same_numel_shape(transposed), label="shape")
    check_gradients(lambda a: a.transpose(0, 1).reshape(new), x)
    check_gradients(lambda a: a.transpose(0, 1).reshape(-1), x)
    check_gradients(lambda a: a.T.reshape(-1) * 1.5, x)


@given(data=st.data())
def test_unsqueeze(data):
    """x.unsqueeze(d) for every valid (negative) d squeezes the grad back."""
    x = data.draw(arrays_of(), label="x")
    d = data.draw(st.integers(-x.ndim - 1, x.ndim), label="d")
    check_gradients(lambda a: a.unsqueeze(d), x)
    check_gradients(lambda a: engine.unsqueeze(a, d), x)


@given(data=st.data())
def test_squeeze_dim(data):
    """x.squeeze(d) (size-1 or not, negative d) restores the grad's shape."""
    x = data.draw(arrays_of(shapes(max_side=2)), label="x")
    d = data.draw(dims_of(x.ndim), label="d")
    check_gradients(lambda a: a.squeeze(d), x)
    check_gradients(lambda a: engine.squeeze(a, d), x)


@given(x=arrays_of(shapes(max_side=2)))
def test_squeeze_all(x):
    """x.squeeze() drops every size-1 dim and the grad gets them all back."""
    check_gradients(lambda a: a.squeeze(), x)
    check_gradients(lambda a: engine.squeeze(a), x)


def _expand_target(shape: tuple):
    """A size list `x.expand` accepts: leading new dims, size-1 dims grown, kept dims sometimes -1."""
    @st.composite
    def _draw(draw):
        lead = draw(st.lists(st.integers(1, 3), max_size=2))
        body = []
        for s in shape:
            if s == 1:
                body.append(draw(st.integers(1, 3)))
            else:
                body.append(draw(st.sampled_from([s, -1])))
        return tuple(lead) + tuple(body)

    return _draw()


@given(data=st.data())
def test_expand(data):
    """x.expand(sizes) (new leading dims, grown size-1 dims, -1) sums the grad back to x's shape."""
    x = data.draw(arrays_of(shapes(max_side=3)), label="x")
    target = data.draw(_expand_target(x.shape), label="sizes")
    check_gradients(lambda a: a.expand(target), x)
    check_gradients(lambda a: a.expand(*target) if target else a.expand(()), x)


INDEXING = {
    # name: (key, min_dims, min size of dim 0, min size of dim 1)
    "x[0]": ((0,), 1, 1, 1),
    "x[-1]": ((-1,), 1, 1, 1),
    "x[0:2]": ((slice(0, 2),), 1, 1, 1),
    "x[1:]": ((slice(1, None),), 1, 2, 1),
    "x[::2]": ((slice(None, None, 2),), 1, 1, 1),
    "x[:, 1]": ((slice(None), 1), 2, 1, 2),
    "x[None]": ((None,), 0, 1, 1),
    "x[..., 0]": ((Ellipsis, 0), 1, 1, 1),
    "x[0, None, 1:]": ((0, None, slice(1, None)), 2, 1, 2),
    "x[-2:]": ((slice(-2, None),), 1, 1, 1),
    "x[:]": ((slice(None),), 1, 1, 1),
    "x[...]": ((Ellipsis,), 0, 1, 1),
}


@pytest.mark.parametrize("name", list(INDEXING))
@given(data=st.data())
def test_indexing(name, data):
    """Basic indexing (x[0], x[0:2], x[:, 1], x[None], ...) scatters the grad into zeros of x's shape."""
    key, min_dims, min0, min1 = INDEXING[name]
    shape = data.draw(shapes(min_dims=min_dims).filter(
        lambda s: (len(s) < 1 or s[0] >= min0) and (len(s) < 2 or s[1] >= min1)), label="shape")
    x = data.draw(arrays(shape), label="x")
    k = key if len(key) > 1 else key[0]
    check_gradients(lambda a: a[k], x)


@given(data=st.data())
def test_cat_and_stack_same_tensor_twice(data):
    """cat([x, x]) and stack([x, x]) accumulate both slices of the grad into x."""
    x = data.draw(arrays_of(shapes(min_dims=1)), label="x")
    d = data.draw(dims_of(x.ndim), label="dim")
    check_gradients(lambda a: engine.cat([a, a * 2.0, a], d), x)
    check_gradients(lambda a: engine.stack([a, a.exp()], d), x)


@given(data=st.data())
def test_cat(data):
    """engine.cat(tensors, dim) slices the grad back to each input."""
    shape = data.draw(shapes(min_dims=1), label="shape")
    d = data.draw(dims_of(len(shape)), label="dim")
    n = data.draw(st.integers(1, 3), label="n")
    arrs = []
    for i in range(n):
        s = list(shape)
        s[d] = data.draw(st.integers(1, 3), label=f"size{i}")
        arrs.append(data.draw(arrays(tuple(s)), label=f"x{i}"))
    check_gradients(lambda *ts: engine.cat(list(ts), d), *arrs)
    check_gradients(lambda *ts: engine.cat(ts, dim=d), *arrs, via="grad")


@given(data=st.data())
def test_stack(data):
    """engine.stack(tensors, dim) selects the grad back to each input, for any new-dim position."""
    shape = data.draw(shapes(), label="shape")
    d = data.draw(st.integers(-len(shape) - 1, len(shape)), label="dim")
    n = data.draw(st.integers(1, 3), label="n")
    arrs = [data.draw(arrays(shape), label=f"x{i}") for i in range(n)]
    check_gradients(lambda *ts: engine.stack(list(ts), d), *arrs)
    check_gradients(lambda *ts: engine.stack(ts, dim=d), *arrs, via="grad")


@given(x=arrays_of())
def test_clone(x):
    """x.clone() and engine.clone(x) pass the grad through unchanged."""
    check_gradients(lambda a: a.clone(), x)
    check_gradients(lambda a: engine.clone(a) * a, x)


# -- selection -----------------------------------------------------------------------------------------------
@given(data=st.data())
def test_where(data):
    """engine.where(cond, a, b) with broadcasting sends the grad to a where cond, else to b (summed to shape)."""
    sc, sa, sb = data.draw(broadcastable_shape_pairs(num_shapes=3), label="shapes")
    cond = data.draw(hnp.arrays(np.bool_, sc), label="cond")
    a = data.draw(arrays(sa), label="a")
    b = data.draw(arrays(sb), label="b")
    c = engine.tensor(cond)
    check_gradients(lambda s, t: engine.where(c, s, t), a, b)
    check_gradients(lambda s, t: engine.where(c, s, t), a, b, wrt=(0,))
    check_gradients(lambda s, t: engine.where(c, s, t), a, b, wrt=(1,))


@given(data=st.data())
def test_where_python_scalar(data):
    """engine.where(cond, a, 0.0) and where(cond, 1.5, b): the tensor side gets the masked grad."""
    x = data.draw(arrays_of(), label="x")
    cond = data.draw(hnp.arrays(np.bool_, x.shape), label="cond")
    c = engine.tensor(cond)
    check_gradients(lambda s: engine.where(c, s, 0.0), x)
    check_gradients(lambda s: engine.where(c, 1.5, s), x)


# -- softmax, losses, linear ---------------------------------------------------------------------------------
SOFTMAX_FORMS = {
    "x.softmax(d)": lambda x, d: x.softmax(d),
    "engine.softmax": lambda x, d: engine.softmax(x, d),
    "F.softmax": lambda x, d: F.softmax(x, dim=d),
    "x.log_softmax(d)": lambda x, d: x.log_softmax(d),
    "engine.log_softmax": lambda x, d: engine.log_softmax(x, d),
    "F.log_softmax": lambda x, d: F.log_softmax(x, dim=d),
}


@pytest.mark.parametrize("form", list(SOFTMAX_FORMS))
@given(data=st.data())
def test_softmax_family(form, data):
    """softmax(dim) / log_softmax(dim) along every (negative) dim, 0-dim included, match finite differences."""
    x = data.draw(arrays_of(), label="x")
    d = data.draw(dims_of(x.ndim), label="dim")
    check_gradients(lambda a: SOFTMAX_FORMS[form](a, d), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(data=st.data())
def test_mse_loss(reduction, data):
    """F.mse_loss(input, target, reduction) gives the right grads to both input and target."""
    shape = data.draw(shapes(), label="shape")
    a = data.draw(arrays(shape), label="input")
    t = data.draw(arrays(shape), label="target")
    check_gradients(lambda s, u: F.mse_loss(s, u, reduction=reduction), a, t)
    check_gradients(lambda s, u: F.mse_loss(s, u, reduction=reduction), a, t, wrt=(0,))
    check_gradients(lambda s, u: F.mse_loss(s, u, reduction=reduction), a, t, wrt=(1,))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("ndim", [1, 2, 3])
@given(n_in=_side, n_out=_side, n=_side, b=_side, data=st.data())
def test_linear(ndim, bias, n_in, n_out, n, b, data):
    """F.linear(x, W[, bias]) for 1-D, 2-D and 3-D x gives the right grads to x, W and bias."""
    shape = {1: (n_in,), 2: (n, n_in), 3: (b, n, n_in)}[ndim]
    x = data.draw(arrays(shape), label="x")
    w = data.draw(arrays((n_out, n_in)), label="W")
    if bias:
        bvec = data.draw(arrays((n_out,)), label="bias")
        check_gradients(lambda s, u, v: F.linear(s, u, v), x, w, bvec)
    else:
        check_gradients(lambda s, u: F.linear(s, u), x, w)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@given(n_in=_side, n_out=_side, n=_side, b=_side, data=st.data())
def test_linear_non_contiguous_input(bias, n_in, n_out, n, b, data):
    """F.linear on a transposed (non-contiguous) 3-D input takes the matmul path with the right grads."""
    x = data.draw(arrays((n, b, n_in)), label="x")
    w = data.draw(arrays((n_out, n_in)), label="W")
    bvec = data.draw(arrays((n_out,)), label="bias")
    if bias:
        check_gradients(lambda s, u, v: F.linear(s.transpose(0, 1), u, v), x, w, bvec)
    else:
        check_gradients(lambda s, u: F.linear(s.transpose(0, 1), u), x, w)


# -- composites and the autograd.grad entry point -----------------------------------------------------------
@given(n=_side, k=_side, m=_side, data=st.data())
def test_composite_mlp(n, k, m, data):
    """A small chain (linear, tanh, softmax, mse_loss, sigmoid, sum) differentiates correctly end to end."""
    x = data.draw(arrays((n, k)), label="x")
    w1 = data.draw(arrays((m, k)), label="W1")
    b1 = data.draw(arrays((m,)), label="b1")
    y = data.draw(arrays((n, m)), label="y")

    def f(xx, ww, bb):
        h = F.linear(xx, ww, bb).tanh()
        p = h.softmax(-1)
        return F.mse_loss(p, engine.tensor(y, dtype=engine.float64)) + (h.sigmoid() * xx.sum(1, keepdim=True)).mean()

    check_gradients(f, x, w1, b1)
    check_gradients(f, x, w1, b1, via="grad")


# -- second order -------------------------------------------------------------------------------------------
SECOND_ORDER_UNARY = {
    "exp": (lambda x: x.exp(), floats(-2.0, 2.0)),
    "sin": (lambda x: x.sin(), floats()),
    "cos": (lambda x: x.cos(), floats()),
    "tanh": (lambda x: x.tanh(), floats()),
    "sigmoid": (lambda x: x.sigmoid(), floats()),
    "log": (lambda x: x.log(), positive(0.3)),
    "sqrt": (lambda x: x.sqrt(), positive(0.3)),
    "x**3": (lambda x: x ** 3, floats()),
    "pow(2.5)": (lambda x: x.pow(2.5), positive(0.3)),
    "2**x": (lambda x: 2 ** x, floats()),
    "2/x": (lambda x: 2 / x, away_from_zero(0.5)),
    "x*x": (lambda x: x * x, floats()),
    "relu(x)*x": (lambda x: x.relu() * x, away_from_zero(1e-3)),
    "abs(x)*x": (lambda x: x.abs() * x, away_from_zero(1e-3)),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER_UNARY))
@given(data=st.data())
def test_second_order_unary(name, data):
    """Double backward of unary ops (exp, sin, tanh, sigmoid, pow, ...) matches differences of the gradient."""
    op, elements = SECOND_ORDER_UNARY[name]
    x = data.draw(arrays_of(elements=elements), label="x")
    check_second_order(op, x)


SECOND_ORDER_BINARY = {
    "mul": (lambda a, b: a * b, floats(), floats()),
    "div": (lambda a, b: a / b, floats(), away_from_zero(0.5)),
    # The exponent avoids exactly 0: there the base's grad is masked by `where(exponent == 0, 0, ...)`, as in
    # PyTorch's pow_backward_self, so its derivative w.r.t. the exponent is 0 at that single point.
    "pow": (lambda a, b: a ** b, positive(0.5), away_from_zero(0.1, 2.0)),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER_BINARY))
@given(data=st.data())
def test_second_order_binary(name, data):
    """Double backward of mul, div and tensor**tensor (with broadcasting) includes the cross terms."""
    op, ea, eb = SECOND_ORDER_BINARY[name]
    a, b = data.draw(broadcastable_array_pairs(elements=[ea, eb]), label="a, b")
    check_second_order(op, a, b)


@given(n=_side, k=_side, m=_side, data=st.data())
def test_second_order_mm(n, k, m, data):
    """Double backward of mm (and of mm with a transposed operand) has the right cross terms."""
    a = data.draw(arrays((n, k)), label="a")
    b = data.draw(arrays((k, m)), label="b")
    check_second_order(lambda s, t: s.mm(t), a, b)
    check_second_order(lambda s, t: s.t().t().mm(t.t().t()) * s.sum(), a, b)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@given(data=st.data())
def test_second_order_softmax(op, data):
    """Double backward of softmax / log_softmax along any dim matches differences of the gradient."""
    x = data.draw(arrays_of(), label="x")
    d = data.draw(dims_of(x.ndim), label="dim")
    check_second_order(lambda a: getattr(a, op)(d), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(data=st.data())
def test_second_order_mse_loss(reduction, data):
    """Double backward of mse_loss w.r.t. input and target, for every reduction."""
    shape = data.draw(shapes(), label="shape")
    a = data.draw(arrays(shape), label="input")
    t = data.draw(arrays(shape), label="target")
    check_second_order(lambda s, u: F.mse_loss(s, u, reduction=reduction), a, t)
    check_second_order(lambda s, u: F.mse_loss(s, u, reduction=reduction) * s, a, t)


@given(n_in=_side, n_out=_side, n=_side, data=st.data())
def test_second_order_linear_composite(n_in, n_out, n, data):
    """Double backward through linear + tanh + log_softmax (shape ops and addmm inside) is correct."""
    x = data.draw(arrays((n, n_in)), label="x")
    w = data.draw(arrays((n_out, n_in)), label="W")
    b = data.draw(arrays((n_out,)), label="bias")
    check_second_order(lambda s, u, v: F.linear(s, u, v).tanh().log_softmax(-1), x, w, b)


def _alternating_mask(shape: tuple) -> engine.Tensor:
    return engine.tensor((np.arange(int(np.prod(shape, dtype=np.int64))) % 2 == 0).reshape(shape))


SECOND_ORDER_STRUCTURAL = {
    # name: (f, elements) on an x with >= 2 dims; each f is nonlinear so its Hessian is not zero.
    "x[0]*x[-1]": (lambda x: x[0] * x[-1], floats()),
    "x[0:2]**2": (lambda x: x[0:2] ** 2, floats()),
    "x[::2]**2": (lambda x: x[::2] ** 2, floats()),
    "x[:,-1]**2": (lambda x: x[:, -1] ** 2, floats()),
    "x[None]**2": (lambda x: x[None] ** 2, floats()),
    "expand**2": (lambda x: x[:, :1].expand(2, *x.shape) ** 2, floats()),
    "cat*cat": (lambda x: engine.cat([x, x * x], 0) * engine.cat([x, x], 0), floats()),
    "stack**2": (lambda x: engine.stack([x, x * x], -1) ** 2, floats()),
    "sum(0)**2": (lambda x: x.sum(0) ** 2, floats()),
    "sum(-1,keepdim)**2": (lambda x: x.sum(-1, keepdim=True) ** 2, floats()),
    "mean(1)**2": (lambda x: x.mean(1) ** 2, floats()),
    "mean()**2": (lambda x: x.mean() ** 2, floats()),
    "transpose*exp": (lambda x: x.transpose(0, 1) * x.transpose(0, 1).exp(), floats()),
    "T**2": (lambda x: x.T ** 2, floats()),
    "view**2": (lambda x: x.view(-1) ** 2, floats()),
    "reshape_nc**2": (lambda x: x.transpose(0, 1).reshape(-1) ** 2, floats()),
    "unsqueeze_squeeze**2": (lambda x: x.unsqueeze(1).squeeze(1) ** 2, floats()),
    "squeeze()**2": (lambda x: x[None].squeeze() ** 2, floats()),
    "clone**2": (lambda x: x.clone() ** 2, floats()),
    "-x**3": (lambda x: (-x) ** 3, floats()),
    "(2-x)**2": (lambda x: (2 - x) ** 2, floats()),
    "max()*x": (lambda x: x.max() * x, None),
    "max(0)**2": (lambda x: x.max(0).values ** 2, None),
    "where**2": (lambda x: engine.where(_alternating_mask(tuple(x.shape)), x, x * x) ** 2, floats()),
    "maximum(x,-x)**2": (lambda x: engine.maximum(x, -x) ** 2, away_from_zero(1e-2)),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER_STRUCTURAL))
@given(data=st.data())
def test_second_order_structural(name, data):
    """Double backward through shape, indexing, reduction and selection ops (their backward-of-backward nodes)."""
    op, elements = SECOND_ORDER_STRUCTURAL[name]
    if elements is None:  # max: distinct values on a grid, so there are no ties
        x = data.draw(arrays(shapes(min_dims=2), elements=grid(), unique=True), label="x")
    else:
        x = data.draw(arrays_of(shapes(min_dims=2), elements=elements), label="x")
    check_second_order(op, x)


@given(x=arrays_of())
def test_grad_accumulates_over_two_backward_calls(x):
    """Two backward passes into the same leaf add up: .grad is the sum of both gradients."""
    t = leaf(x)
    (t.sin() * 2.0).sum().backward()
    (t * t).sum().backward()
    np.testing.assert_allclose(to_numpy(t.grad), 2.0 * np.cos(x) + 2.0 * x, rtol=1e-12, atol=1e-12)


# -- harness self-check -------------------------------------------------------------------------------------
def test_central_difference_helper_is_accurate():
    """The finite-difference helper itself reproduces a known analytic gradient (guards the harness)."""
    x = np.array([[0.3, -1.2], [2.0, 0.7]])
    numeric = central_difference(lambda arrs: float(np.sum(np.sin(arrs[0]) * arrs[0] ** 2)), [x], 0)
    np.testing.assert_allclose(numeric, np.cos(x) * x ** 2 + 2 * x * np.sin(x), rtol=1e-8, atol=1e-8)
