"""Reductions: sum, mean, max, argmax, and the elementwise maximum."""
from __future__ import annotations

import builtins
import warnings
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
MinResult = namedtuple("min", ["values", "indices"])
"""What `min(dim)` returns, like torch.return_types.min."""


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
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, _given_dims(dim), keepdim
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


def _given_dims(dim: Any) -> tuple[int, ...]:
    """A reduction's dims as the node saves them: as given (order, sign, repeats kept), as a tuple."""
    return (int(dim),) if isinstance(dim, int) else tuple(int(d) for d in dim)


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
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, _given_dims(dim), keepdim
        node.self_sym_numel = a._data.size
        record(node, (a,), out)
    return out


@public("max", torch=True, tensor=True)
def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The largest element (MaxBackward1); with `dim`, (values, indices) (MaxBackward0)."""
    if isinstance(dim, Tensor):
        return maximum(a, dim)
    return _extreme(a, dim, keepdim, "max")


@public("min", torch=True, tensor=True)
def min(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The smallest element (MinBackward1); with `dim`, (values, indices) (MinBackward0)."""
    if isinstance(dim, Tensor):
        raise NotImplementedError("engine.min(a, b) (torch.minimum) is not implemented")
    return _extreme(a, dim, keepdim, "min")


def _extreme(a: Tensor, dim: Any, keepdim: bool, which: str) -> Any:
    is_max = which == "max"
    if dim is None:
        if a._data.size == 0:
            raise RuntimeError(f"{which}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        node = (fn.MaxBackward1() if is_max else fn.MinBackward1()) if needs_grad(a) else None
        out = _out(a._data.max() if is_max else a._data.min(), a)
        if node is not None:
            node.self, node.result = a, out
            record(node, (a,), out)
        return out
    node = (fn.MaxBackward0() if is_max else fn.MinBackward0()) if needs_grad(a) else None
    d = _wrap_dim(dim, a._data.ndim)
    if a._data.ndim and a._data.shape[d] == 0:
        raise IndexError(f"{which}(): Expected reduction dim {d} to have non-zero size.")
    arg = np.argmax if is_max else np.argmin
    idx = arg(a._data, axis=d) if a._data.ndim else np.array(0)
    values = np.take_along_axis(a._data, np.expand_dims(idx, d), d) if a._data.ndim else a._data
    if not keepdim and a._data.ndim:
        values = values.squeeze(d)
    else:
        idx = np.expand_dims(idx, d) if a._data.ndim else idx
    out = _out(values, a)
    indices = _out(idx.astype(np.int64), a)
    if node is not None:
        node.dim, node.keepdim, node.indices, node.self_sym_sizes = dim, keepdim, indices, a._data.shape
        record(node, (a,), out)
    return (MaxResult if is_max else MinResult)(out, indices)


@public("argmax", torch=True, tensor=True)
def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (no grad)."""
    return _arg_index(np.argmax, a, dim, keepdim)


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


@public("argmin", torch=True, tensor=True)
def argmin(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (no grad)."""
    return _arg_index(np.argmin, a, dim, keepdim)


def _arg_index(find: Any, a: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """argmax/argmin: `find` over all elements (dim None) or along `dim`, as int64."""
    if dim is None:
        return _out(np.array(find(a._data), dtype=np.int64), a)
    d = _wrap_dim(dim, a._data.ndim)
    res = find(a._data, axis=d)
    if keepdim:
        res = np.expand_dims(res, d)
    return _out(res.astype(np.int64), a)


def _correction(dim: Any, unbiased: Any, correction: Any) -> Any:
    """The correction as var/std's node saves it: as given, else 1 or 0 from `unbiased` (torch's overloads with
    a dim or `unbiased` turn it into one), else None (meaning 1) when only the tensor was given."""
    if correction is not None:
        return correction
    if unbiased is None and dim is None:
        return None
    return int(unbiased is None or bool(unbiased))


def correction_value(correction: Any) -> float:
    """The number a saved correction stands for."""
    return 1.0 if correction is None else float(correction)


def _var_args(a: Tensor, dim: Any, unbiased: Any, correction: Any) -> tuple:
    """(wrapped dims or None, dims as given or None, correction as saved)."""
    if isinstance(dim, bool):  # var(unbiased) positional, as torch's overload
        dim, unbiased = None, dim
    if a._data.dtype.kind != "f":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if dim is None:
        return None, None, _correction(dim, unbiased, correction)
    return _dims(dim, a._data.ndim), _given_dims(dim), _correction(dim, unbiased, correction)


def _var_data(a: Tensor, dims: Any, corr: float, keepdim: bool) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axis = None if dims is None or not a._data.ndim else dims
        n = a._data.size if axis is None else int(np.prod([a._data.shape[d] for d in axis]))
        mean = a._data.mean(axis=axis, keepdims=True)
        ss = ((a._data - mean) ** 2).sum(axis=axis, keepdims=keepdim and axis is not None)
        res = ss / builtins.max(n - corr, 0)
    return np.asarray(res, dtype=a._data.dtype)


@public("var", torch=True, tensor=True)
def var(a: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Variance with Bessel's correction by default → VarBackward0."""
    dims, given, corr = _var_args(a, dim, unbiased, correction)
    node = fn.VarBackward0() if needs_grad(a) else None
    out = _out(_var_data(a, dims, correction_value(corr), keepdim), a)
    if node is not None:
        node.self, node.dim, node.correction, node.keepdim = a, given, corr, keepdim
        record(node, (a,), out)
    return out


@public("std", torch=True, tensor=True)
def std(a: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Standard deviation with Bessel's correction by default → StdBackward0."""
    dims, given, corr = _var_args(a, dim, unbiased, correction)
    node = fn.StdBackward0() if needs_grad(a) else None
    out = _out(np.sqrt(_var_data(a, dims, correction_value(corr), keepdim)), a)
    if node is not None:
        node.self, node.dim, node.correction, node.keepdim, node.result = a, given, corr, keepdim, out
        record(node, (a,), out)
    return out


@public("logsumexp", torch=True, tensor=True)
def logsumexp(a: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(a), dim)), computed stably → LogsumexpBackward0."""
    if a._data.dtype.kind != "f":
        a = to(a, np.float32)
    node = fn.LogsumexpBackward0() if needs_grad(a) else None
    dims = _dims(dim, a._data.ndim)
    axis = dims if a._data.ndim else None
    with np.errstate(all="ignore"):
        m = np.max(a._data, axis=axis, keepdims=True) if a._data.size else np.zeros((1,) * a._data.ndim)
        m = np.where(np.isfinite(m), m, 0)
        res = np.log(np.exp(a._data - m).sum(axis=axis, keepdims=True)) + m
    if not keepdim and a._data.ndim:
        res = res.squeeze(axis)
    out = _out(np.asarray(res, dtype=a._data.dtype).reshape(res.shape if a._data.ndim else ()), a)
    if node is not None:
        node.self, node.dim, node.keepdim, node.result = a, _given_dims(dim), keepdim, out
        record(node, (a,), out)
    return out


@public("norm", torch=True, tensor=True)
def norm(a: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Vector p-norm over all elements or `dim` (torch's linalg_vector_norm) → LinalgVectorNormBackward0."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str) or (dim is not None and not isinstance(dim, int) and len(dim) == 2 and p != 2):
        raise NotImplementedError(f"engine.norm supports vector p-norms with p >= 1 only; got p={p!r}")
    given_p, p = p, float(p)
    if not p >= 1 or np.isinf(p):
        raise NotImplementedError(f"engine.norm supports vector p-norms with finite p >= 1 only; got p={p}")
    if dtype is not None:
        a = to(a, dtype)
    if a._data.dtype.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{_dtype_title(a)}")
    node = fn.LinalgVectorNormBackward0() if needs_grad(a) else None
    dims = tuple(range(a._data.ndim)) if dim is None else _dims(dim, a._data.ndim)
    axis = dims if a._data.ndim else None
    with np.errstate(all="ignore"):
        x = np.abs(a._data)
        res = x.sum(axis=axis, keepdims=keepdim) if p == 1 else \
            np.sqrt((x * x).sum(axis=axis, keepdims=keepdim)) if p == 2 else \
            (x ** p).sum(axis=axis, keepdims=keepdim) ** (1 / p)
    out = _out(np.asarray(res, dtype=a._data.dtype), a)
    if node is not None:
        node.self, node.ord, node.keepdim, node.result = a, given_p, keepdim, out  # ord and dim as given
        node.dim = None if dim is None else _given_dims(dim)
        record(node, (a,), out)
    return out


def _truth(a: Tensor, dim: Any, keepdim: bool, np_fn) -> Tensor:
    if dim is None:
        return _out(np.asarray(np_fn(a._data)), a)
    dims = _dims(dim, a._data.ndim)
    return _out(np.asarray(np_fn(a._data, axis=dims if a._data.ndim else None, keepdims=keepdim)), a)


@public("any", torch=True, tensor=True)
def any(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether any element is nonzero (a bool tensor, never recorded)."""
    return _truth(a, dim, keepdim, np.any)


@public("all", torch=True, tensor=True)
def all(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether every element is nonzero (a bool tensor, never recorded)."""
    return _truth(a, dim, keepdim, np.all)
