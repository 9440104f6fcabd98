"""Unary pointwise ops: exp, log, sin, cos, tanh, sigmoid, relu, sqrt, abs, sgn."""
from __future__ import annotations

from typing import Any

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


@public("sgn", torch=True, tensor=True)
def sgn(a: Tensor) -> Tensor:
    """Sign → SgnBackward0."""
    node = fn.SgnBackward0() if needs_grad(a) else None
    out = _out(np.sign(a._data), a)
    if node is not None:
        node.self, node.result = a, out  # saved for the complex case of sgn_backward, as torch always does
        record(node, (a,), out)
    return out


@public("sign", torch=True, tensor=True)
def sign(a: Tensor) -> Tensor:
    """Sign → SignBackward0."""
    node = fn.SignBackward0() if needs_grad(a) else None
    out = _out(np.sign(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out


@public("log1p", torch=True, tensor=True)
def log1p(a: Tensor) -> Tensor:
    """log(1 + a) → Log1PBackward0."""
    return _unary(np.log1p, fn.Log1PBackward0, a, "self")


@public("expm1", torch=True, tensor=True)
def expm1(a: Tensor) -> Tensor:
    """exp(a) - 1 → Expm1Backward0."""
    return _unary(np.expm1, fn.Expm1Backward0, a, "result")


@public("square", torch=True, tensor=True)
def square(a: Tensor) -> Tensor:
    """a ** 2 (torch decomposes it into pow) → PowBackward0."""
    from .arith import pow

    return pow(a, 2)


def _clamp_data(a: Tensor, lo: Any, hi: Any) -> np.ndarray:
    data = a._data
    with np.errstate(invalid="ignore"):
        if lo is not None:
            data = np.where(np.isnan(data) | (data >= lo), data, np.asarray(lo, dtype=data.dtype))
        if hi is not None:
            data = np.where(np.isnan(data) | (data <= hi), data, np.asarray(hi, dtype=data.dtype))
    return np.asarray(data, dtype=a._data.dtype)


@public("clamp", torch=("clamp", "clip"), tensor=("clamp", "clip"))
def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
    """Limit to [min, max] with numbers → ClampBackward1 (tensor bounds are not supported)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        raise NotImplementedError("engine.clamp supports number bounds only (torch's ClampBackward0 with "
                                  "tensor bounds is not implemented); use engine.maximum/minimum")
    node = fn.ClampBackward1() if needs_grad(a) else None  # taken before the check, as in torch
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    out = _out(_clamp_data(a, min, max), a)
    if node is not None:
        node.self, node.min, node.max = a, min, max
        record(node, (a,), out)
    return out


@public("clamp_min", torch=True, tensor=True)
def clamp_min(a: Tensor, min: Any) -> Tensor:  # noqa: A002
    """max(a, min) for a number → ClampMinBackward0."""
    if isinstance(min, Tensor):
        raise NotImplementedError("engine.clamp_min supports a number bound only")
    node = fn.ClampMinBackward0() if needs_grad(a) else None
    out = _out(_clamp_data(a, min, None), a)
    if node is not None:
        node.self, node.min = a, min
        record(node, (a,), out)
    return out


@public("clamp_max", torch=True, tensor=True)
def clamp_max(a: Tensor, max: Any) -> Tensor:  # noqa: A002
    """min(a, max) for a number → ClampMaxBackward0."""
    if isinstance(max, Tensor):
        raise NotImplementedError("engine.clamp_max supports a number bound only")
    node = fn.ClampMaxBackward0() if needs_grad(a) else None
    out = _out(_clamp_data(a, None, max), a)
    if node is not None:
        node.self, node.max = a, max
        record(node, (a,), out)
    return out
