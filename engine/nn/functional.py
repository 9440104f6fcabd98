"""`engine.nn.functional`: mse_loss, linear, softmax, log_softmax, relu, sigmoid, tanh."""
from __future__ import annotations

from typing import Any

from .. import _ops
from .._dispatch import public, table
from .._tensor import Tensor


@public("mse_loss", functional=True)
def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean") -> Tensor:
    """Mean squared error → MseLossBackward0."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average and reduce are deprecated; use reduction=")
    return _ops.mse_loss(input, target, reduction)


@public("linear", functional=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.t() + bias → TBackward0 and AddmmBackward0 (bias, input, weight.t())."""
    return _ops.linear(input, weight, bias)


@public("softmax", functional=True)
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Softmax along `dim` → SoftmaxBackward0."""
    if dim is None:
        raise TypeError("softmax() requires dim= (PyTorch's implicit choice of dim is deprecated; engine has none)")
    return _ops.softmax(input, dim, dtype)


@public("log_softmax", functional=True)
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Log-softmax along `dim` → LogSoftmaxBackward0."""
    if dim is None:
        raise TypeError("log_softmax() requires dim= (implicit dim choice is deprecated in PyTorch)")
    return _ops.log_softmax(input, dim, dtype)


@public("relu", functional=True)
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0) → ReluBackward0."""
    return _ops.relu(input)


@public("sigmoid", functional=True)
def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid → SigmoidBackward0."""
    return _ops.sigmoid(input)


@public("tanh", functional=True)
def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent → TanhBackward0."""
    return _ops.tanh(input)


globals().update(table("nn.functional"))  # the names above, now passing through the dispatch point
__all__ = list(table("nn.functional"))
