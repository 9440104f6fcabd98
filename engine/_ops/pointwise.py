"""Unary pointwise ops: exp, log, sin, cos, tanh, sigmoid, relu, sqrt, abs, sgn."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .._dispatch import public
from .._tensor import Tensor
from ._common import _arr, _float_data, _out, needs_grad, record


def _unary(np_fn, node_cls, a: Tensor, save: str) -> Tensor:
    node = node_cls() if needs_grad(a) else None
    with np.errstate(all="ignore"):
        out = _out(np_fn(_float_data(a)), a)
    if node is not None:
        setattr(node, save, a if save == "self" else out)
        record(node, (a,), out)
    return out


@public("exp", torch=True, tensor=True)
def exp(a: Tensor) -> Tensor:
    """e ** a → ExpBackward0."""
    return _unary(np.exp, fn.ExpBackward0, a, "result")


@public("log", torch=True, tensor=True)
def log(a: Tensor) -> Tensor:
    """Natural log → LogBackward0."""
    return _unary(np.log, fn.LogBackward0, a, "self")


@public("sin", torch=True, tensor=True)
def sin(a: Tensor) -> Tensor:
    """Sine → SinBackward0."""
    return _unary(np.sin, fn.SinBackward0, a, "self")


@public("cos", torch=True, tensor=True)
def cos(a: Tensor) -> Tensor:
    """Cosine → CosBackward0."""
    return _unary(np.cos, fn.CosBackward0, a, "self")


@public("tanh", torch=True, tensor=True)
def tanh(a: Tensor) -> Tensor:
    """Hyperbolic tangent → TanhBackward0."""
    return _unary(np.tanh, fn.TanhBackward0, a, "result")


def _sigmoid_np(x: np.ndarray) -> np.ndarray:
    return _arr(1.0 / (1.0 + np.exp(-x))).astype(x.dtype, copy=False)


@public("sigmoid", torch=True, tensor=True)
def sigmoid(a: Tensor) -> Tensor:
    """Logistic sigmoid → SigmoidBackward0."""
    return _unary(_sigmoid_np, fn.SigmoidBackward0, a, "result")


@public("relu", torch=True, tensor=True)
def relu(a: Tensor) -> Tensor:
    """max(a, 0) → ReluBackward0."""
    node = fn.ReluBackward0() if needs_grad(a) else None
    out = _out(np.maximum(a._data, a._data.dtype.type(0)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("sqrt", torch=True, tensor=True)
def sqrt(a: Tensor) -> Tensor:
    """Square root → SqrtBackward0."""
    return _unary(np.sqrt, fn.SqrtBackward0, a, "result")


@public("abs", torch=True, tensor=("abs", "__abs__"))
def abs(a: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """Absolute value → AbsBackward0."""
    node = fn.AbsBackward0() if needs_grad(a) else None
    out = _out(np.abs(a._data), a)
    if node is not None:
        node.self = a
        record(node, (a,), out)
    return out


@public("sign", tensor=True)
@public("sgn", tensor=True)
def sgn(a: Tensor) -> Tensor:
    """Sign → SgnBackward0."""
    node = fn.SgnBackward0() if needs_grad(a) else None
    out = _out(np.sign(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out
