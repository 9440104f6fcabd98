"""scatter, scatter_add and gather: what max(dim)'s derivative formula records, as in PyTorch."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _functions as fn
from .._dispatch import public
from .._tensor import Tensor, _wrap_dim, make_tensor
from ._common import _out, needs_grad, record, save_inputs


def _put(dst: np.ndarray, dim: int, index: np.ndarray, values: np.ndarray, add: bool) -> None:
    if dst.ndim == 0:  # a 0-dim scatter writes the one element
        dst[()] = dst[()] + values[()] if add else values[()]
    elif add:
        np.add.at(dst, _full_index(index, dim), np.broadcast_to(values, index.shape) if values.ndim == 0
                  else values[tuple(slice(0, s) for s in index.shape)])
    else:
        np.put_along_axis(dst, index, values if values.ndim == 0 else
                          values[tuple(slice(0, s) for s in index.shape)], dim)


def _full_index(index: np.ndarray, dim: int) -> tuple:
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def scatter(a: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
    """Write `src` (a tensor: ScatterBackward0, or a number: ScatterBackward1) at `index` along `dim`."""
    d = _wrap_dim(dim, a._data.ndim)
    if isinstance(src, Tensor):
        node = save_inputs(fn.ScatterBackward0(), dim=dim, index=index) if needs_grad(a, src) else None
        data = a._data.copy()
        _put(data, d, index._data, src._data, add=False)
        inputs = (a, src)
    else:
        node = save_inputs(fn.ScatterBackward1(), dim=dim, index=index) if needs_grad(a) else None
        data = a._data.copy()
        _put(data, d, index._data, np.asarray(src, dtype=a._data.dtype), add=False)
        inputs = (a,)
    out = _out(data, a)
    if node is not None:
        record(node, inputs, out)
    return out


def scatter_add(a: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Add `src` into `a` at `index` along `dim` → ScatterAddBackward0."""
    d = _wrap_dim(dim, a._data.ndim)
    node = save_inputs(fn.ScatterAddBackward0(), dim=dim, index=index) if needs_grad(a, src) else None
    data = a._data.copy()
    _put(data, d, index._data, src._data, add=True)
    out = _out(data, a)
    if node is not None:
        record(node, (a, src), out)
    return out


@public("gather", torch=True, tensor=True)
def gather(a: Tensor, dim: int, index: Tensor) -> Tensor:
    """Read `a` at `index` along `dim` → GatherBackward0."""
    d = _wrap_dim(dim, a._data.ndim)
    # torch's gather saves self (for its sizes) and the dim as given
    node = save_inputs(fn.GatherBackward0(), dim=dim, index=index, self=a, sparse_grad=False) if needs_grad(a) \
        else None
    if index._data.dtype != np.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    if index._data.ndim != a._data.ndim and a._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    data = a._data.copy() if a._data.ndim == 0 else _gathered(a._data, index._data, d)
    out = _out(data, a)
    if node is not None:
        record(node, (a,), out)
    return out


def _gathered(x: np.ndarray, index: np.ndarray, d: int) -> np.ndarray:
    """torch's gather: the result has the index's shape, which may be smaller than `x` on every dim but `d`."""
    for i, (n, m) in enumerate(zip(index.shape, x.shape, strict=True)):
        if i != d and n > m:
            raise RuntimeError(f"Size does not match at dimension {i} expected index {list(index.shape)} to be no "
                               f"larger than self {list(x.shape)} apart from dimension {d}")
    bad = (index < 0) | (index >= x.shape[d])
    if bad.any():
        raise RuntimeError(f"index {int(index[bad].flat[0])} is out of bounds for dimension {d} with size "
                           f"{x.shape[d]}")
    part = x[tuple(slice(None) if i == d else slice(0, n) for i, n in enumerate(index.shape))]
    return np.take_along_axis(part, index, d)


def zeros_of(sizes: tuple, like: Tensor) -> Tensor:
    """at::zeros(sizes, grad.options()), recording nothing."""
    return make_tensor(np.zeros(sizes, dtype=like._data.dtype), device=like._device)
