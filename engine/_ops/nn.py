"""where, masked_fill, softmax, log_softmax and mse_loss."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import _functions as fn
from .._args import required_dim
from .._dispatch import public
from .._dtype import c_type_name, scalar_type_name
from .._layout import tensor_iterator_layout
from .._tensor import Tensor, _wrap_dim
from ._common import (
    _arr,
    _float_data,
    _out,
    _pair,
    broadcast_shape,
    common_device,
    needs_grad,
    record,
    result_dtype,
    save_inputs,
    scalar_tensor,
)
from .shape import expand, to


@public("where", torch=True)
def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """Pick from `a` where `condition`, else from `b` → WhereBackward0 with slots (a, b)."""
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be Tensor")
    a, b = _pair(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else _pair(
        scalar_tensor(a, condition), b)
    device = common_device(condition, a, b)
    node = save_inputs(fn.WhereBackward0(), condition=condition) if needs_grad(a, b) else None
    if condition._data.dtype != np.bool_:  # the kernel's check: the node took its seq_nr and saved condition
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{scalar_type_name(condition)}")
    dt = result_dtype(a, b)
    shape = broadcast_shape(condition, a, b)  # torch broadcasts in this order (its error names them so)
    data = np.where(condition._data, a._data, b._data).astype(dt, copy=False).reshape(shape)
    out = _out(tensor_iterator_layout(data, (condition._data, a._data, b._data)), device)  # torch's strides
    if node is not None:
        record(node, (a, b), out)
    return out


@public("masked_fill", tensor=True)
def masked_fill(a: Tensor, mask: Tensor, value: Any) -> Tensor:
    """Fill where `mask` with a number (MaskedFillBackward0) or a 0-dim tensor (MaskedFillBackward1)."""
    common_device(a, mask)
    if isinstance(value, Tensor):
        # the node takes its seq_nr first (so does MaskedFillBackward0's below); the kernel then expands (mask,
        # self) and checks the value's dims
        node = save_inputs(fn.MaskedFillBackward1(), mask=mask) if needs_grad(a, value) else None
        broadcast_shape(mask, a)  # expand_outplace(mask, self)'s error for shapes that do not broadcast
        if value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
        _check_bool_mask(mask)
        out = _out(np.asarray(np.where(mask._data, value._data.astype(a._data.dtype), a._data), order="C"), a)
        if node is not None:
            record(node, (a, value), out)
        return out
    node = save_inputs(fn.MaskedFillBackward0(), mask=mask) if needs_grad(a) else None
    broadcast_shape(mask, a)  # expand_outplace(mask, self)'s error for shapes that do not broadcast (not numpy's)
    _check_bool_mask(mask)
    # torch fills a contiguous clone of `a`
    out = _out(np.asarray(np.where(mask._data, np.asarray(value, dtype=a._data.dtype), a._data), order="C"), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _check_bool_mask(mask: Tensor) -> None:
    if mask._data.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {c_type_name(mask)}")


def _shifted(x: np.ndarray, d: int) -> np.ndarray:
    """x less its max along d (x - x for a 0-dim x: nan for nan and infinities, as torch's kernel gives)."""
    return x - x if x.ndim == 0 else x - x.max(axis=d, keepdims=True)


def _softmax_np(x: np.ndarray, d: int) -> np.ndarray:
    shifted = _shifted(x, d)
    e = np.exp(shifted)
    return e / (e if x.ndim == 0 else e.sum(axis=d, keepdims=True))


def _log_softmax_np(x: np.ndarray, d: int) -> np.ndarray:
    shifted = _shifted(x, d)
    return shifted - np.log(np.exp(shifted) if x.ndim == 0 else np.exp(shifted).sum(axis=d, keepdims=True))


def _softmax_like(np_fn, node_cls, a: Tensor, dim: int, dtype: Any) -> Tensor:
    if dtype is not None:
        a = to(a, dtype)
    node = node_cls() if needs_grad(a) else None
    d = _wrap_dim(dim, a._data.ndim)
    x = _float_data(a)
    if x.dtype == np.float16:  # torch's half kernel computes in float and rounds once
        values = np_fn(x.astype(np.float32), d).astype(np.float16)
    else:
        values = np_fn(x, d)
    out = _out(np.asarray(values, order="C"), a)  # contiguous whatever the input's layout
    if node is not None:
        node.dim, node.result = dim, out  # the dim as given
        record(node, (a,), out)
    return out


@public("softmax", torch=True)
def softmax(a: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Softmax along `dim` → SoftmaxBackward0."""
    return _softmax_like(_softmax_np, fn.SoftmaxBackward0, a, dim, dtype)


@public("log_softmax", torch=True)
def log_softmax(a: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Log-softmax along `dim` → LogSoftmaxBackward0."""
    return _softmax_like(_log_softmax_np, fn.LogSoftmaxBackward0, a, dim, dtype)


@public("softmax", tensor=True)
def _softmax_method(self: Tensor, dim: Any = None, dtype: Any = None) -> Tensor:
    """Tensor.softmax: as `softmax`, with the argument parser's check that `dim` is given."""
    return softmax(self, required_dim("softmax", dim), dtype)


@public("log_softmax", tensor=True)
def _log_softmax_method(self: Tensor, dim: Any = None, dtype: Any = None) -> Tensor:
    """Tensor.log_softmax: as `log_softmax`, with the argument parser's check that `dim` is given."""
    return log_softmax(self, required_dim("log_softmax", dim), dtype)


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def mse_loss(a: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error → MseLossBackward0 with slots (input, target)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if a._data.shape != target._data.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({a.shape}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=3)
    device = common_device(a, target)
    # F.mse_loss broadcasts first (torch.broadcast_tensors): a mismatch takes no seq_nr, and each operand of
    # another shape is expanded (ExpandBackward0, input first).
    shape = tuple(broadcast_shape(a, target))
    if a._data.shape != shape:
        a = expand(a, *shape)
    if target._data.shape != shape:
        target = expand(target, *shape)
    node = save_inputs(fn.MseLossBackward0(), self=a, target=target, reduction=_REDUCTIONS[reduction]) \
        if needs_grad(a, target) else None
    diff = np.square(a._data - target._data)
    data = diff if reduction == "none" else (diff.mean() if reduction == "mean" else diff.sum())
    out = _out(_arr(data).astype(result_dtype(a, target), copy=False), device)
    if node is not None:
        record(node, (a, target), out)
    return out
