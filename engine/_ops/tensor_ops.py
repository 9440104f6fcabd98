"""log10, tril/triu (and their in-place forms), flip/fliplr/flipud, roll, topk, Tensor.type and narrow, with the
nodes torch 2.13 records (Log10Backward0, TrilBackward0, TriuBackward0, FlipBackward0, RollBackward0, TopkBackward0,
ToCopyBackward0, SliceBackward0).

Each node is made before the op's checks, as torch's generated code makes it, so a call that fails on a tensor
that requires grad has taken its seq_nr.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .._args import int_arg
from .._dispatch import public
from .._dtype import bfloat16, bool_, float16, float32, float64, int32, int64, legacy_type_name
from .._dtype import dtype as dtype_cls
from .._functions import _Generated, _written
from .._tensor import Tensor, _wrap_dim
from ._common import _float_data, _out, needs_grad, quietly, record, save_inputs

TopkResult = namedtuple("topk", ["values", "indices"])
"""What `topk` returns, like torch.return_types.topk."""

_LN10 = 2.3025850929940455  # the number torch's formula saves in its MulBackward1 (M_LN10 as it reaches Python)


# -- log10 ------------------------------------------------------------------------------------------------
class Log10Backward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad / (self.conj() * M_LN10)
            from . import div, mul_scalar

            out[0] = div(grad, mul_scalar(self.self, _LN10))


@public("log10", torch=True, tensor=True)
def log10(a: Tensor) -> Tensor:
    """Base-10 log → Log10Backward0 (integers give the default float dtype)."""
    node = save_inputs(Log10Backward0(), self=a) if needs_grad(a) else None
    data = _float_data(a)
    # float32 through float64, correctly rounded: numpy's float32 log10 is off by an ulp where torch's is not
    out = _out(quietly(np.log10, data.astype(np.float64)).astype(data.dtype) if data.dtype == np.float32
               else quietly(np.log10, data), a)
    if node is not None:
        record(node, (a,), out)
    return out


# -- tril / triu ------------------------------------------------------------------------------------------
class TrilBackward0(_Generated):
    __slots__ = ("diagonal",)
    _saved_values = ("diagonal",)
    _saved_int64 = ("diagonal",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = tril(grad, self.diagonal)


class TriuBackward0(_Generated):
    __slots__ = ("diagonal",)
    _saved_values = ("diagonal",)
    _saved_int64 = ("diagonal",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = triu(grad, self.diagonal)


def _triangle(a: Tensor, diagonal: Any, lower: bool) -> Tensor:
    name = "tril" if lower else "triu"
    node = (TrilBackward0() if lower else TriuBackward0()) if needs_grad(a) else None
    diagonal = int_arg(name, "diagonal", 2, diagonal)
    if a._data.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    data = np.tril(a._data, diagonal) if lower else np.triu(a._data, diagonal)
    out = _out(np.ascontiguousarray(data), a)
    if node is not None:
        node.diagonal = diagonal
        record(node, (a,), out)
    return out


@public("tril", torch=True, tensor=True)
def tril(a: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (on and below `diagonal`) → TrilBackward0."""
    return _triangle(a, diagonal, True)


@public("triu", torch=True, tensor=True)
def triu(a: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (on and above `diagonal`) → TriuBackward0."""
    return _triangle(a, diagonal, False)


def _triangle_(lower: bool):
    def method(self: Tensor, diagonal: int = 0) -> Tensor:
        from .._inplace import _old, _rebase, _records, _write

        compute = tril if lower else triu
        if not _records(self, ()):
            _write(self, compute(self, diagonal)._data)
            return self
        return _rebase(self, compute(_old(self), diagonal))  # the formula needs no saved self: no clone
    method.__doc__ = f"{'tril' if lower else 'triu'} in place."
    return method


public("tril_", tensor=True)(_triangle_(True))
public("triu_", tensor=True)(_triangle_(False))


# -- flip -------------------------------------------------------------------------------------------------
class FlipBackward0(_Generated):
    __slots__ = ("dims",)
    _saved_values = ("dims",)
    _saved_int64 = ("dims",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = flip(grad, self.dims)


def _flip(a: Tensor, dims: tuple) -> Tensor:
    node = FlipBackward0() if needs_grad(a) else None
    nd = a._data.ndim
    wrapped = []
    for d in dims:
        w = _wrap_dim(d, nd)
        if w in wrapped:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        wrapped.append(w)
    data = np.flip(a._data, tuple(wrapped)) if nd else a._data
    out = _out(np.array(data), a)  # a copy, contiguous, as torch's kernel writes
    if node is not None:
        node.dims = tuple(dims)
        record(node, (a,), out)
    return out


def flip(a: Tensor, *dims: Any) -> Tensor:
    """Reverse the order of elements along `dims` (ints, or one tuple or list of them) → FlipBackward0."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _flip(a, tuple(int_arg("flip", "dims", 1, d) for d in dims))


@public("flip", torch="flip")
def _flip_function(input: Tensor, dims: Any) -> Tensor:  # noqa: A002 - torch's name
    """Reverse the order of elements along `dims` → FlipBackward0."""
    return flip(input, *(dims if isinstance(dims, (tuple, list)) else (dims,)))


public("flip", tensor=True)(flip)


@public("fliplr", torch=True, tensor=True)
def fliplr(a: Tensor) -> Tensor:
    """flip(1) of a tensor of at least 2 dims."""
    if a._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return _flip(a, (1,))


@public("flipud", torch=True, tensor=True)
def flipud(a: Tensor) -> Tensor:
    """flip(0) of a tensor of at least 1 dim."""
    if a._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return _flip(a, (0,))


# -- roll -------------------------------------------------------------------------------------------------
class RollBackward0(_Generated):
    __slots__ = ("shifts", "dims")
    _saved_values = ("dims", "shifts")
    _saved_int64 = ("dims", "shifts")

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad.roll(-reversed(shifts), reversed(dims))
            out[0] = _roll(grad, tuple(-s for s in reversed(self.shifts)), tuple(reversed(self.dims)))


def _roll(a: Tensor, shifts: tuple, dims: tuple) -> Tensor:
    node = RollBackward0() if needs_grad(a) else None
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    nd = a._data.ndim
    if dims:
        data = np.roll(a._data, shifts, tuple(_wrap_dim(d, nd) for d in dims))
    else:  # rolled as a flattened tensor, then given its shape back
        data = np.roll(a._data.reshape(-1), shifts[0]).reshape(a._data.shape)
    out = _out(np.array(data), a)
    if node is not None:
        node.shifts, node.dims = shifts, dims
        record(node, (a,), out)
    return out


def _int_tuple(name: str, value: Any) -> tuple:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return tuple(int_arg("roll", name, 1, v) for v in values)


@public("roll", torch=True, tensor=True)
def roll(input: Tensor, shifts: Any, dims: Any = ()) -> Tensor:  # noqa: A002 - torch's name
    """Shift elements along `dims` (cyclically; along the flattened tensor without dims) → RollBackward0."""
    return _roll(input, _int_tuple("shifts", shifts), _int_tuple("dims", dims) if dims is not None else ())


# -- topk -------------------------------------------------------------------------------------------------
class TopkBackward0(_Generated):
    __slots__ = ("dim", "indices", "self_sym_sizes")
    _saved_tensor_names = ("indices",)
    _saved_values = ("dim", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # value_selecting_reduction_backward(grad, dim, indices, sizes, true)
            from . import scatter, zeros_of

            zeros = zeros_of(self.self_sym_sizes, grad)
            out[0] = _written(scatter(zeros, self.dim, self.indices, grad), 2)


def _order(x: np.ndarray, largest: bool) -> np.ndarray:
    """Indices sorting the last axis for topk: NaN counts as the largest value; equal values keep their order."""
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, dtype=bool)
    if largest:
        key = -np.where(nan, 0, x) if x.dtype.kind != "b" else ~x
        return np.lexsort((key, ~nan), axis=-1)
    return np.lexsort((np.where(nan, 0, x), nan), axis=-1)


def _stl_order(moved: np.ndarray, order: np.ndarray, k: int, largest: bool, sorted_: bool) -> None:
    """Where the values' own order is not torch's (a row with equal values, or sorted=False), `order`'s row
    becomes the order torch's kernel leaves (engine/_ops/_stl.py), in place."""
    from ._stl import topk_indices

    rows = moved.reshape(-1, moved.shape[-1])
    flat = order.reshape(-1, k)
    for r, row in enumerate(rows):
        if not sorted_ or np.unique(row).size < row.size:
            flat[r] = topk_indices(row.tolist(), k, largest, sorted_)


@public("topk", torch=True, tensor=True)
def topk(a: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopkResult:  # noqa: A002
    """The `k` largest (or smallest) elements along `dim` and their int64 indices → TopkBackward0 on values,
    equal values (and sorted=False) in the order torch's kernel leaves them."""
    node = TopkBackward0() if needs_grad(a) else None
    k = int_arg("topk", "k", 1, k)
    dim = int_arg("topk", "dim", 2, dim)
    x = a._data
    d = _wrap_dim(dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    if x.ndim == 0:  # torch gives the element itself for k 0 and 1
        values, idx = x.copy(), np.zeros((), dtype=np.int64)
    else:
        moved = np.moveaxis(x, d, -1)
        order = np.ascontiguousarray(_order(moved, largest)[..., :k])  # rows written in place below
        if k:
            _stl_order(moved, order, k, largest, sorted)
        values = np.moveaxis(np.take_along_axis(moved, order, -1), -1, d)
        idx = np.moveaxis(order.astype(np.int64), -1, d)
    out = _out(np.array(values, order="C"), a)  # (ascontiguousarray makes a 0-dim array 1-D)
    indices = _out(np.array(idx, order="C"), a)
    if node is not None:
        node.dim, node.indices, node.self_sym_sizes = dim, indices, x.shape
        record(node, (a,), out)
    return TopkResult(out, indices)


# -- Tensor.type ------------------------------------------------------------------------------------------
_LEGACY_TYPES = {legacy_type_name(d): d for d in (float32, float64, float16, bfloat16, int64, int32, bool_)}


@public("type", tensor=True)
def type_(a: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """With no dtype, the tensor type's name (`torch.FloatTensor`); else the tensor cast to a dtype, a tensor
    type or its name (ToCopyBackward0), or the tensor itself when it already is of that type."""
    from .._legacy import _LegacyType
    from .shape import to

    if dtype is None:
        return legacy_type_name(a.dtype, a._device)
    if isinstance(dtype, _LegacyType):
        target = dtype._dtype
    elif isinstance(dtype, dtype_cls):
        target = dtype
    else:
        name = dtype if isinstance(dtype, str) else getattr(dtype, "__name__", repr(dtype))
        if name not in _LEGACY_TYPES:
            raise ValueError(f"invalid type: '{name}'")
        target = _LEGACY_TYPES[name]
    if target.np == a._data.dtype and a._device == "cpu":
        return a
    return to(a, target)


__all__ = ["log10", "tril", "triu", "flip", "fliplr", "flipud", "roll", "topk", "TopkResult"]


# -- narrow -----------------------------------------------------------------------------------------------
@public("narrow", torch=True, tensor=True)
def narrow(a: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """a.slice(dim, start, start + length) after at::narrow's checks → SliceBackward0 (a view)."""
    from .shape import slice_

    if a.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if isinstance(start, Tensor):
        start = int(start.item())
    start, length = int_arg("narrow", "start", 2, start), int_arg("narrow", "length", 3, length)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    size = a._data.shape[_wrap_dim(dim, a._data.ndim)]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return slice_(a, dim, start, start + length)
