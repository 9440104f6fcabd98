"""amax and amin: the largest or smallest value over dims (all by default), with the gradient split evenly among
ties (AmaxBackward0, AminBackward0: torch's scale_grad_by_count formula, in engine ops for create_graph)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .._dispatch import public
from .._functions import _Generated
from .._tensor import Tensor, _wrap_dim
from ._common import _out, needs_grad, record, save_inputs


class _AmaxAminBackward(_Generated):
    __slots__ = ("self", "dim", "keepdim", "result")
    _saved_tensor_names = ("self", "result")
    _saved_values = ("dim", "keepdim")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            from . import compare, div, mul
            from . import sum as sum_
            ndim = self.self._data.ndim
            dims = tuple(range(ndim)) if not self.dim else tuple(sorted({_wrap_dim(d, ndim) for d in self.dim}))
            # scale_grad_by_count(restore_reduced_dims(grad), restore_reduced_dims(result) == self, dim): C++
            # evaluates the arguments right to left, so the result's reshape takes its seq_nr first
            mask = compare(np.equal, _restore(self.result, dims, self.keepdim, ndim), self.self)
            grad = _restore(grad, dims, self.keepdim, ndim)
            out[0] = mul(div(grad, sum_(mask, dims, True)), mask)


class AmaxBackward0(_AmaxAminBackward):
    __slots__ = ()


class AminBackward0(_AmaxAminBackward):
    __slots__ = ()


def _restore(t: Tensor, dims: tuple, keepdim: bool, ndim: int) -> Tensor:
    """restore_reduced_dims: the reduced dims back as size 1, by a reshape (a view node under create_graph)."""
    from .shape import reshape
    if keepdim:
        return t
    shape = list(t._data.shape)
    for d in dims:
        shape.insert(d, 1)
    return reshape(t, tuple(shape))


def _amax_amin(a: Tensor, dim: Any, keepdim: bool, name: str) -> Tensor:
    dims_given = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    node = None
    if needs_grad(a):
        node = save_inputs(AmaxBackward0() if name == "amax" else AminBackward0(), self=a)
        node.dim, node.keepdim = dims_given, keepdim
    ndim = a._data.ndim
    dims = tuple(sorted({_wrap_dim(d, ndim) for d in dims_given})) if dims_given else None
    if a._data.size == 0:
        if dims is None:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        for d in dims:
            if ndim and a._data.shape[d] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    reduce = np.max if name == "amax" else np.min
    data = reduce(a._data, axis=dims if ndim else None, keepdims=keepdim and ndim > 0)
    out = _out(np.asarray(data, dtype=a._data.dtype), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("amax", torch=True, tensor=True)
def amax(a: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The largest value over `dim` (every dim by default) → AmaxBackward0."""
    return _amax_amin(a, dim, keepdim, "amax")


@public("amin", torch=True, tensor=True)
def amin(a: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The smallest value over `dim` (every dim by default) → AminBackward0."""
    return _amax_amin(a, dim, keepdim, "amin")
