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
from .._dtype import as_dtype, scalar_type_name
from .._layout import contiguous_strides
from .._tensor import Tensor, _wrap_dim
from ._common import _binary, _dims, _out, needs_grad, record, save_inputs
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
    out = _reduced(data, a)
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


def _reduced(data: Any, like: Tensor) -> Tensor:
    """A reduction's result: contiguous, as torch allocates it (numpy keeps the input's dim order, and odd strides
    at size-1 dims of a permuted input)."""
    return _out(contiguous_strides(np.asarray(data)), like)


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
            f"dtype. Got: {scalar_type_name(a)}")
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
        out = _reduced(a._data.mean(axis=dims if a._data.ndim else None, keepdims=keepdim, dtype=a._data.dtype), a)
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
        node = save_inputs(fn.MaxBackward1() if is_max else fn.MinBackward1(), self=a) if needs_grad(a) else None
        out = _out(a._data.max() if is_max else a._data.min(), a)
        if node is not None:
            node.result = out
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
    out = _reduced(values, a)
    indices = _reduced(idx.astype(np.int64), a)
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
    node = save_inputs(fn.MaximumBackward0(), self=a, other=b) if needs_grad(a, b) else None
    out = _out(_binary(np.maximum, a, b), a)
    if node is not None:
        record(node, (a, b), out)
    return out


@public("argmin", torch=True, tensor=True)
def argmin(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (no grad)."""
    return _arg_index(np.argmin, a, dim, keepdim)


def _arg_index(find: Any, a: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """argmax/argmin: `find` over all elements (dim None) or along `dim`, as int64. keepdim keeps every dim as
    size 1 with no `dim`, and a 0-dim input stays 0-dim."""
    if dim is None:
        res = np.array(find(a._data), dtype=np.int64)
        return _out(res.reshape((1,) * a._data.ndim) if keepdim else res, a)
    d = _wrap_dim(dim, a._data.ndim)
    res = find(a._data, axis=d if a._data.ndim else None)
    if keepdim and a._data.ndim:
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
    node = save_inputs(fn.VarBackward0(), self=a, dim=given, correction=corr, keepdim=keepdim) if needs_grad(a) \
        else None
    out = _reduced(_var_data(a, dims, correction_value(corr), keepdim), a)
    if node is not None:
        record(node, (a,), out)
    return out


@public("std", torch=True, tensor=True)
def std(a: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Standard deviation with Bessel's correction by default → StdBackward0."""
    dims, given, corr = _var_args(a, dim, unbiased, correction)
    node = save_inputs(fn.StdBackward0(), self=a, dim=given, correction=corr, keepdim=keepdim) if needs_grad(a) \
        else None
    out = _reduced(np.sqrt(_var_data(a, dims, correction_value(corr), keepdim)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("logsumexp", torch=True, tensor=True)
def logsumexp(a: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(a), dim)), computed stably → LogsumexpBackward0."""
    if a._data.dtype.kind != "f":
        a = to(a, np.float32)
    node = save_inputs(fn.LogsumexpBackward0(), self=a, keepdim=keepdim) if needs_grad(a) else None
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
        node.dim, node.result = _given_dims(dim), out
        record(node, (a,), out)
    return out


@public("norm", torch=True, tensor=True)
def norm(a: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """torch.norm on CPU: a number p (None meaning 2), or "fro" over at most two dims, is linalg.vector_norm;
    other strings go to matrix_norm, which the engine has only for its errors."""
    if isinstance(p, str):
        multi = dim is not None and not isinstance(dim, int) and len(dim) > 2
        if p == "fro" and not multi:
            p = 2
        else:
            _matrix_norm_refusal(a, p, dim)
    return vector_norm(a, 2.0 if p is None else p, dim, keepdim, dtype=dtype)


def _matrix_norm_refusal(a: Tensor, p: str, dim: Any) -> None:
    """linalg.matrix_norm's argument errors; the nuclear and 2-dim Frobenius norms it computes are missing."""
    if p not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    dims = list(range(a._data.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    raise NotImplementedError(f"agdb's engine does not implement the matrix norm {p!r} (it needs an SVD); "
                              f"use a number p for a vector norm")


_NUMBER = (int, float, np.number)


@public("vector_norm", linalg=True)
def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002 - torch's names
                dtype: Any = None) -> Tensor:
    """The vector `ord`-norm of all elements, or over `dim` → LinalgVectorNormBackward0. ord 0 counts nonzeros,
    inf and -inf take the largest and smallest magnitude; `dtype` converts inside the op (no node of its own)."""
    if not isinstance(ord, _NUMBER) or isinstance(ord, bool):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
    if dim is not None and not isinstance(dim, int) and not (
            isinstance(dim, (tuple, list)) and builtins.all(isinstance(d, int) for d in dim)):
        raise TypeError(f"linalg_vector_norm(): argument 'dim' (position 3) must be tuple of ints, not "
                        f"{type(dim).__name__}")
    # Made, and saving x, before the checks below, as in torch; ord and dim as given (dim None or (): every dim).
    node = save_inputs(fn.LinalgVectorNormBackward0(), self=x, ord=ord, keepdim=keepdim) if needs_grad(x) else None
    data = _norm_input(x, dtype)
    dims = _norm_dims(x, dim)
    p = float(ord)
    _check_identity(x, p, ord, dim, dims)
    axis = dims if x._data.ndim else None
    with np.errstate(all="ignore"):
        res = _norm_np(np.abs(data), p, axis, keepdim)
    out = _reduced(np.asarray(res, dtype=data.dtype), x)
    if node is not None:
        node.result, node.dim = out, None if dim is None else _given_dims(dim)
        record(node, (x,), out)
    return out


def _norm_input(x: Tensor, dtype: Any) -> np.ndarray:
    if x._data.dtype.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{scalar_type_name(x)}")
    if dtype is None:
        return x._data
    target = as_dtype(dtype).np
    if target.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but got "
                           f"{scalar_type_name(target)}")
    if target.itemsize < x._data.dtype.itemsize:
        raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({scalar_type_name(x)}) should be convertible "
                           f"without narrowing to the specified dtype ({scalar_type_name(target)})")
    return x._data.astype(target)


def _norm_dims(x: Tensor, dim: Any) -> tuple[int, ...]:
    """The reduced dims, sorted: all of them for None or an empty list; a repeated dim is refused."""
    ndim = x._data.ndim
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(ndim))
    wrapped = [_wrap_dim(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
    for i, d in enumerate(wrapped):
        if d in wrapped[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(sorted(wrapped)) if ndim else ()


def _check_identity(x: Tensor, p: float, ord: Any, dim: Any, dims: tuple) -> None:  # noqa: A002
    """inf and negative norms have no value on nothing: refuse an empty input or an empty reduced dim."""
    if x._data.size or not (p < 0 or np.isinf(p)):
        return
    shown = f"{ord:g}" if isinstance(ord, float) else str(ord)
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {shown} norm on an empty tensor because the "
                           f"operation does not have an identity")
    for d in dims:
        if x._data.shape[d] == 0:  # torch's message has no space after the dim
            raise RuntimeError(f"linalg.vector_norm cannot compute the {shown} norm on the dimension {d}because "
                               f"this dimension is empty and the operation does not have an identity")


def _norm_np(mag: np.ndarray, p: float, axis: Any, keepdim: bool) -> np.ndarray:
    if p == 0:
        return (mag != 0).sum(axis=axis, keepdims=keepdim)
    if np.isinf(p):
        return (mag.max if p > 0 else mag.min)(axis=axis, keepdims=keepdim)
    if p == 1:
        return mag.sum(axis=axis, keepdims=keepdim)
    if p == 2:
        return np.sqrt((mag * mag).sum(axis=axis, keepdims=keepdim))
    return (mag ** p).sum(axis=axis, keepdims=keepdim) ** (1 / p)


def _truth(a: Tensor, dim: Any, keepdim: bool, np_fn) -> Tensor:
    if dim is None:
        return _out(np.asarray(np_fn(a._data)), a)
    dims = _dims(dim, a._data.ndim)
    return _reduced(np.asarray(np_fn(a._data, axis=dims if a._data.ndim else None, keepdims=keepdim)), a)


@public("any", torch=True, tensor=True)
def any(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether any element is nonzero (a bool tensor, never recorded)."""
    return _truth(a, dim, keepdim, np.any)


@public("all", torch=True, tensor=True)
def all(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether every element is nonzero (a bool tensor, never recorded)."""
    return _truth(a, dim, keepdim, np.all)
