"""The Tensor surface's differentiable ops (issue 12) and the losses' weighted forms against central finite
differences in float64.

First order: `(op(x) * w).sum()` differentiated by autograd.grad against a central difference; second
order: `autograd.grad((g * v).sum(), x)` for `g` made with create_graph, against central differences of g.
"""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine

EPS = 1e-6
X = np.array([[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, 0.9], [0.2, 0.4, -0.6, 1.1]])
Y = np.array([[[0.1, 0.2], [0.3, -0.4], [0.5, 0.6], [-0.7, 0.8]]] * 2) * np.array([1.0, -0.5])[:, None, None]

LO4 = np.array([0.0, -1.0, 1.0, 0.3])
HI31 = np.array([[1.0], [0.8], [0.5]])


def _c(a: np.ndarray):
    return engine.tensor(a, dtype=engine.float64)


F = engine.nn.functional
T3 = engine.tensor([0, 3, 1])
CW4 = np.array([0.5, 1.0, 2.0, 4.0])
P34 = np.clip(np.abs(X) / 2.5, 0.05, 0.95)
PW4 = np.array([2.0, 0.5, 1.5, 1.0])

OPS = {
    "unbind": (lambda x: engine.stack([u * (i + 1) for i, u in enumerate(x.unbind(1))]), X),
    "iterate": (lambda x: engine.stack([r.exp() for r in x]), X),
    "split": (lambda x: engine.cat([p * (i + 2) for i, p in enumerate(x.split([1, 3], 1))], 1), X),
    "chunk": (lambda x: x.chunk(2, 1)[1].sin(), X),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), X),
    "clamp_min": (lambda x: x.clamp_min(0.25), X),
    "clamp_max": (lambda x: x.clamp_max(0.25), X),
    "clamp_tensors": (lambda x: x.clamp(_c(LO4), _c(HI31)), X),
    "clamp_tensors_min": (lambda lo: _c(X).clamp(lo, _c(HI31)), LO4),
    "clamp_tensors_max": (lambda hi: _c(X).clamp(_c(LO4), hi), HI31),
    "clamp_tensor_min_only": (lambda lo: _c(X).clamp(lo), LO4),
    "clamp_min_tensor": (lambda lo: _c(X).clamp_min(lo), LO4),
    "clamp_max_tensor": (lambda hi: _c(X).clamp_max(hi), HI31),
    "clamp_max_tensor_self": (lambda x: x.clamp_max(_c(HI31)), X),
    "square": (lambda x: x.square(), X),
    "nll_loss_weight": (lambda x: F.nll_loss(x, T3, weight=_c(CW4)), X),
    "nll_loss_weight_none": (lambda x: F.nll_loss(x, T3, weight=_c(CW4), reduction="none"), X),
    "cross_entropy_weight_smoothing": (lambda x: F.cross_entropy(x, T3, weight=_c(CW4), label_smoothing=0.2), X),
    "cross_entropy_smoothing_ignore": (lambda x: F.cross_entropy(x, T3, label_smoothing=0.3, ignore_index=3,
                                                                 reduction="sum"), X),
    "bce_logits_weights": (lambda x: F.binary_cross_entropy_with_logits(x, _c(P34), weight=_c(CW4),
                                                                        pos_weight=_c(PW4)), X),
    "bce_logits_weights_target": (lambda p: F.binary_cross_entropy_with_logits(_c(X), p, weight=_c(CW4),
                                                                               pos_weight=_c(PW4)), P34),
    "bce_logits_weight_target_sum": (lambda p: F.binary_cross_entropy_with_logits(_c(X), p, weight=_c(CW4),
                                                                                  reduction="sum"), P34),
    "logsigmoid": (lambda x: F.logsigmoid(x), X),
    "log1p": (lambda x: x.abs().log1p(), X),
    "expm1": (lambda x: x.expm1(), X),
    "min_dim": (lambda x: x.min(1).values, X),
    "max_dim": (lambda x: x.max(0, keepdim=True).values, X),
    "var": (lambda x: x.var(), X),
    "var_dim": (lambda x: x.var(1), X),
    "var_biased": (lambda x: x.var(0, unbiased=False, keepdim=True), X),
    "std": (lambda x: x.std(), X),
    "std_dim": (lambda x: x.std(1), X),
    "logsumexp": (lambda x: x.logsumexp(1), X),
    "norm": (lambda x: x.norm(), X),
    "norm_dim": (lambda x: x.norm(dim=0), X),
    "norm_1": (lambda x: x.norm(1, 1), X),
    "norm_3": (lambda x: x.norm(3), X),
    "norm_1_5": (lambda x: x.norm(1.5, 1, True), X),
    "norm_half": (lambda x: x.norm(0.5), X),
    "norm_half_dim": (lambda x: x.norm(0.5, 1), X),
    "norm_neg1_dim": (lambda x: x.norm(-1, 0, True), X),
    "norm_inf": (lambda x: x.norm(float("inf")), X),
    "norm_inf_dim": (lambda x: x.norm(float("inf"), 1), X),
    "norm_neg_inf_dim": (lambda x: engine.linalg.vector_norm(x, float("-inf"), 0), X),
    "vector_norm_3": (lambda x: engine.linalg.vector_norm(x, 3, (0, 1)), X),
    "gather": (lambda x: x.gather(1, engine.tensor([[0, 0], [3, 1], [2, 2]])), X),
    "index_select": (lambda x: x.index_select(1, engine.tensor([0, 2, 0])), X),
    "index_mask": (lambda x: x[engine.tensor(X > 0)] * 2, X),
    "index_int": (lambda x: x[engine.tensor([2, 0, 2])], X),
    "index_mixed": (lambda x: x[:, engine.tensor([3, 0, 3])], X),
    "bmm": (lambda y: engine.bmm(y, y.mT), Y),
    "matmul_batched": (lambda y: y[None] @ y.mT, Y),
    "matmul_3d_1d": (lambda y: y @ engine.tensor([0.5, -1.0], dtype=engine.float64), Y),
}


def _grad(f, x: np.ndarray, w: np.ndarray, create_graph: bool = False):
    t = engine.tensor(x, dtype=engine.float64, requires_grad=True)
    (g,) = engine.autograd.grad((f(t) * engine.tensor(w)).sum(), t, create_graph=create_graph)
    return t, g


def _value(f, x: np.ndarray, w: np.ndarray) -> float:
    with engine.no_grad():
        return float((f(engine.tensor(x, dtype=engine.float64)) * engine.tensor(w)).sum().item())


def _numeric(scalar, x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += EPS
        lo[i] -= EPS
        out[i] = (scalar(hi) - scalar(lo)) / (2 * EPS)
    return out


def _weights(f, x: np.ndarray) -> np.ndarray:
    with engine.no_grad():
        shape = f(engine.tensor(x, dtype=engine.float64)).shape
    return np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape) * np.where(np.arange(int(np.prod(shape))) % 2,
                                                                                1, -1).reshape(shape)


@pytest.mark.parametrize("name", sorted(OPS))
def test_first_order(name):
    f, x = OPS[name]
    w = _weights(f, x)
    _, g = _grad(f, x, w)
    np.testing.assert_allclose(g.numpy(), _numeric(lambda d: _value(f, d, w), x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(OPS))
def test_second_order(name):
    f, x = OPS[name]
    w = _weights(f, x)
    v = np.cos(np.arange(x.size)).reshape(x.shape)
    t, g = _grad(f, x, w, create_graph=True)
    if g.grad_fn is None:  # a piecewise-linear op: the grad does not depend on x
        return
    (h,) = engine.autograd.grad((g * engine.tensor(v)).sum(), t, allow_unused=True)
    expected = _numeric(lambda d: float((_grad(f, d, w)[1].detach().numpy() * v).sum()), x)
    # clone(): a ZeroTensor (sgn's grad) refuses numpy(), as in torch
    np.testing.assert_allclose(0 if h is None else h.clone().numpy(), expected, rtol=1e-4, atol=1e-5)
