"""Binds the op functions to Tensor as methods and operators, the way torch.Tensor exposes them."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _inplace, _ops
from ._args import reduction_dim, required_dim
from ._dtype import bool_, float32, float64, int64
from ._tensor import Tensor

_NUMBER = (int, float, bool, np.number)


def _binary(op):
    """An operator that defers (NotImplemented) to Python for operands it cannot take, as torch does."""
    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, (Tensor,) + _NUMBER):
            return NotImplemented
        return op(self, other)
    return method


def _reflected(op):
    return _binary(lambda self, other: op(other, self))


def _size_args(args: tuple) -> tuple:
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _pow(self: Tensor, exponent: Any) -> Tensor:
    return _ops.pow(self, exponent)


def _rpow(self: Tensor, base: Any) -> Tensor:
    return _ops.pow(base, self)


def _rsub(self: Tensor, other: Any) -> Tensor:
    if isinstance(other, Tensor):
        return _ops.sub(other, self)
    return _ops.rsub(self, other)


def _rtruediv(self: Tensor, other: Any) -> Tensor:
    if isinstance(other, Tensor):
        return _ops.div(other, self)
    return _ops.rdiv(self, other)


def _not_inplace(name: str):
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        raise NotImplementedError(f"engine does not implement in-place ops such as Tensor.{name}; use the "
                                  "out-of-place form")
    return method


_METHODS = {
    "__add__": _binary(_ops.add), "__radd__": _binary(_ops.add),
    "__sub__": _binary(_ops.sub), "__rsub__": _binary(_rsub),
    "__mul__": _binary(_ops.mul), "__rmul__": _binary(_ops.mul),
    "__truediv__": _binary(_ops.div), "__rtruediv__": _binary(_rtruediv),
    "__pow__": _binary(_pow), "__rpow__": _binary(_rpow),
    "__matmul__": _binary(_ops.matmul), "__rmatmul__": _reflected(_ops.matmul),
    "__neg__": _ops.neg, "__abs__": _ops.abs,
    "__getitem__": _ops.getitem,
    "__lt__": lambda s, o: _ops.compare(np.less, s, o),
    "__le__": lambda s, o: _ops.compare(np.less_equal, s, o),
    "__gt__": lambda s, o: _ops.compare(np.greater, s, o),
    "__ge__": lambda s, o: _ops.compare(np.greater_equal, s, o),
    "__eq__": lambda s, o: _ops.compare(np.equal, s, o),
    "__ne__": lambda s, o: _ops.compare(np.not_equal, s, o),
    "__and__": lambda s, o: _ops.compare(np.logical_and, s, o),
    "__or__": lambda s, o: _ops.compare(np.logical_or, s, o),
    "__invert__": lambda s: _ops._out(np.logical_not(s._data) if s._data.dtype == np.bool_ else ~s._data, s),
    "add": _ops.add, "sub": _ops.sub, "mul": _ops.mul, "div": _ops.div, "pow": _pow,
    "neg": _ops.neg, "reciprocal": _ops.reciprocal,
    "exp": _ops.exp, "log": _ops.log, "sin": _ops.sin, "cos": _ops.cos, "tanh": _ops.tanh,
    "sigmoid": _ops.sigmoid, "relu": _ops.relu, "sqrt": _ops.sqrt, "abs": _ops.abs, "sgn": _ops.sgn,
    "sign": _ops.sgn,
    "sum": lambda s, dim=None, keepdim=False, dtype=None: _ops.sum(s, reduction_dim("sum", dim), keepdim, dtype),
    "mean": lambda s, dim=None, keepdim=False, dtype=None: _ops.mean(s, reduction_dim("mean", dim), keepdim, dtype),
    "max": lambda s, dim=None, keepdim=False: _ops.max(s, dim, keepdim),
    "argmax": _ops.argmax, "maximum": _ops.maximum,
    "matmul": _ops.matmul, "mm": _ops.mm, "mv": _ops.mv, "dot": _ops.dot,
    "t": _ops.t, "transpose": _ops.transpose, "permute": lambda s, *dims: _ops.permute(s, _size_args(dims)),
    "view": _ops.view, "reshape": _ops.reshape, "flatten": _ops.flatten,
    "unsqueeze": _ops.unsqueeze, "squeeze": _ops.squeeze, "expand": _ops.expand,
    "expand_as": lambda s, other: _ops.expand(s, other.shape), "view_as": lambda s, other: _ops.view(s, other.shape),
    "reshape_as": lambda s, other: _ops.reshape(s, other.shape),
    "select": _ops.select, "clone": lambda s, memory_format=None: _ops.clone(s), "contiguous": _ops.contiguous,
    "softmax": lambda s, dim=None, dtype=None: _ops.softmax(s, required_dim("softmax", dim), dtype),
    "log_softmax": lambda s, dim=None, dtype=None: _ops.log_softmax(s, required_dim("log_softmax", dim), dtype),
    "masked_fill": _ops.masked_fill, "isnan": _ops.isnan,
    "to": _ops.to,
    "float": lambda s: _ops.to(s, dtype=float32), "double": lambda s: _ops.to(s, dtype=float64),
    "long": lambda s: _ops.to(s, dtype=int64), "bool": lambda s: _ops.to(s, dtype=bool_),
    "cpu": lambda s: _ops.to(s, "cpu"),
    "cuda": lambda s, device=None: _ops.to(s, "cuda" if device is None else
                                           (f"cuda:{device}" if isinstance(device, int) else device)),
    "eq": lambda s, o: _ops.compare(np.equal, s, o), "ne": lambda s, o: _ops.compare(np.not_equal, s, o),
    "lt": lambda s, o: _ops.compare(np.less, s, o), "le": lambda s, o: _ops.compare(np.less_equal, s, o),
    "gt": lambda s, o: _ops.compare(np.greater, s, o), "ge": lambda s, o: _ops.compare(np.greater_equal, s, o),
}

_METHODS.update(_inplace.METHODS)
for _name in ("pow_", "exp_", "neg_", "clamp_", "masked_fill_", "relu_", "sigmoid_", "tanh_", "sqrt_", "abs_", "t_",
              "transpose_", "unsqueeze_", "squeeze_"):
    _METHODS[_name] = _not_inplace(_name)


def install() -> None:
    """Attach the method table to Tensor (called once by engine/__init__)."""
    for name, func in _METHODS.items():
        setattr(Tensor, name, func)
    Tensor.T = property(lambda s: _ops.permute(s, tuple(range(s._data.ndim - 1, -1, -1))))
    Tensor.mT = property(lambda s: _ops.transpose(s, -2, -1))
