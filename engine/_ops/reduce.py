"""Reductions: sum, mean, max, argmax, and the elementwise maximum."""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .. import _functions as fn
from .._args import reduction_dim
from .._dispatch import public
from .._tensor import Tensor, _wrap_dim
from ._common import _binary, _dims, _dtype_title, _out, needs_grad, record
from .shape import to

MaxResult = namedtuple("max", ["values", "indices"])
"""What `max(dim)` returns, like torch.return_types.max."""


@public("sum", torch=True)
def sum(a: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:  # noqa: A001
    """Sum of all elements (SumBackward0) or along `dim` (SumBackward1)."""
    if dim is None:
        node = fn.SumBackward0() if needs_grad(a) else None
        data = a._data.sum(dtype=np.int64 if a._data.dtype.kind in "bi" else None)
        out = _out(data, a)
        if node is not None:
            node.self_sym_sizes = a._data.shape
            record(node, (a,), out)
        return _maybe_cast(out, dtype)
    node = fn.SumBackward1() if needs_grad(a) else None
    dims = _dims(dim, a._data.ndim)
    data = a._data.sum(axis=dims if a._data.ndim else None, keepdims=keepdim,
                       dtype=np.int64 if a._data.dtype.kind in "bi" else None)
    out = _out(data, a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, dims, keepdim
        record(node, (a,), out)
    return _maybe_cast(out, dtype)


@public("sum", tensor=True)
def _sum_method(self: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Tensor.sum: as `sum`, with the argument parser's check of `dim`."""
    return sum(self, reduction_dim("sum", dim), keepdim, dtype)


@public("mean", tensor=True)
def _mean_method(self: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Tensor.mean: as `mean`, with the argument parser's check of `dim`."""
    return mean(self, reduction_dim("mean", dim), keepdim, dtype)


def _maybe_cast(t: Tensor, dtype: Any) -> Tensor:
    return t if dtype is None else to(t, dtype)


@public("mean", torch=True)
def mean(a: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Mean of all elements (MeanBackward0) or along `dim` (MeanBackward1)."""
    if dtype is not None:
        a = to(a, dtype)
    if a._data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {_dtype_title(a)}")
    if dim is None:
        node = fn.MeanBackward0() if needs_grad(a) else None
        with np.errstate(invalid="ignore"):
            out = _out(a._data.mean(dtype=a._data.dtype), a)
        if node is not None:
            node.self_sym_sizes, node.self_sym_numel = a._data.shape, a._data.size
            record(node, (a,), out)
        return out
    node = fn.MeanBackward1() if needs_grad(a) else None
    dims = _dims(dim, a._data.ndim)
    with np.errstate(invalid="ignore"):
        out = _out(a._data.mean(axis=dims if a._data.ndim else None, keepdims=keepdim, dtype=a._data.dtype), a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, dims, keepdim
        record(node, (a,), out)
    return out


@public("max", torch=True, tensor=True)
def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The largest element (MaxBackward1); with `dim`, (values, indices) (MaxBackward0)."""
    if isinstance(dim, Tensor):
        return maximum(a, dim)
    if dim is None:
        if a._data.size == 0:
            raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        node = fn.MaxBackward1() if needs_grad(a) else None
        out = _out(a._data.max(), a)
        if node is not None:
            node.self, node.result = a, out
            record(node, (a,), out)
        return out
    node = fn.MaxBackward0() if needs_grad(a) else None
    d = _wrap_dim(dim, a._data.ndim)
    idx = np.argmax(a._data, axis=d) if a._data.ndim else np.array(0)
    values = np.take_along_axis(a._data, np.expand_dims(idx, d), d) if a._data.ndim else a._data
    if not keepdim and a._data.ndim:
        values = values.squeeze(d)
    else:
        idx = np.expand_dims(idx, d) if a._data.ndim else idx
    out = _out(values, a)
    indices = _out(idx.astype(np.int64), a)
    if node is not None:
        node.dim, node.keepdim, node.indices, node.self_sym_sizes = d, keepdim, indices, a._data.shape
        record(node, (a,), out)
    return MaxResult(out, indices)


@public("argmax", torch=True, tensor=True)
def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (no grad)."""
    if dim is None:
        return _out(np.array(np.argmax(a._data), dtype=np.int64), a)
    d = _wrap_dim(dim, a._data.ndim)
    res = np.argmax(a._data, axis=d)
    if keepdim:
        res = np.expand_dims(res, d)
    return _out(res.astype(np.int64), a)


@public("maximum", torch=True, tensor=True)
def maximum(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise maximum → MaximumBackward0."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        bad = b if isinstance(a, Tensor) else a
        raise TypeError(f"maximum(): argument '{'other' if isinstance(a, Tensor) else 'input'}' (position "
                        f"{2 if isinstance(a, Tensor) else 1}) must be Tensor, not {type(bad).__name__}")
    node = fn.MaximumBackward0() if needs_grad(a, b) else None
    out = _out(_binary(np.maximum, a, b), a)
    if node is not None:
        node.self, node.other = a, b
        record(node, (a, b), out)
    return out
