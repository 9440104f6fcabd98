"""Tensor factories: tensor, zeros, ones, the *_like forms, and a few random ones.

Random factories draw from numpy's generator, so their values differ from PyTorch's for the same seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._args import factory_size, infer_data_shape
from ._device import canonical_device
from ._dispatch import public
from ._dtype import as_dtype, get_default_dtype
from ._tensor import Tensor, _coerce_array, make_tensor

_rng = np.random.default_rng(0)


def _finish(arr: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    t = make_tensor(arr, device=canonical_device(device))
    if requires_grad:
        if arr.dtype.kind != "f":  # the factories word it differently from requires_grad_()
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t._requires_grad = True
    return t


@public("tensor", torch=True)
def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (floats default to float32, ints to int64)."""
    if isinstance(data, Tensor):
        arr = np.array(data._data, copy=True)
    else:
        if not isinstance(data, np.ndarray):
            infer_data_shape(data)
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError(f"could not make a tensor from {type(data).__name__}: {e}") from None
        if arr.dtype == object:
            raise TypeError(f"could not make a tensor from {data!r}: expected numbers or nested lists of numbers")
        if arr.dtype.kind == "f" and not isinstance(data, np.ndarray) and dtype is None:
            arr = arr.astype(get_default_dtype().np)  # Python floats become float32 unless told otherwise
        arr = _coerce_array(arr)
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype).np)
    return _finish(arr, requires_grad, device)


def _np_dtype(dtype: Any) -> np.dtype:
    return (as_dtype(dtype) if dtype is not None else get_default_dtype()).np


@public("zeros", torch=True)
def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros."""
    return _finish(np.zeros(factory_size("zeros", size), dtype=_np_dtype(dtype)), requires_grad, device)


@public("ones", torch=True)
def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return _finish(np.ones(factory_size("ones", size), dtype=_np_dtype(dtype)), requires_grad, device)


@public("full", torch=True)
def full(size: Any, fill_value: float, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`."""
    np_dtype = _np_dtype(dtype) if dtype is not None or isinstance(fill_value, float) else np.dtype(np.int64)
    return _finish(np.full(factory_size("full", (size,)), fill_value, dtype=np_dtype), requires_grad, device)


def _like(t: Tensor, dtype: Any, device: Any) -> tuple[tuple, np.dtype, Any]:
    return t._data.shape, (as_dtype(dtype).np if dtype is not None else t._data.dtype), (device or t._device)


@public("zeros_like", torch=True)
def zeros_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:
    """Zeros with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(np.zeros(shape, dtype=np_dtype), requires_grad, dev)


@public("ones_like", torch=True)
def ones_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:
    """Ones with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(np.ones(shape, dtype=np_dtype), requires_grad, dev)


@public("empty", torch=True)
def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of the given size (zero-filled here)."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


@public("arange", torch=True)
def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in [start, end)."""
    if end is None:
        start, end = 0, start
    is_float = any(isinstance(v, float) for v in (start, end, step))
    np_dtype = _np_dtype(dtype) if (dtype is not None or is_float) else np.dtype(np.int64)
    return _finish(np.arange(start, end, step).astype(np_dtype), requires_grad, device)


def manual_seed(seed: int) -> None:
    """Seed the generator behind randn and rand (numpy's, so values differ from PyTorch's)."""
    global _rng
    _rng = np.random.default_rng(int(seed))


@public("randn", torch=True)
def randn(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    return _finish(_rng.standard_normal(factory_size("randn", size)).astype(_np_dtype(dtype)), requires_grad, device)


@public("rand", torch=True)
def rand(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _finish(_rng.random(factory_size("rand", size)).astype(_np_dtype(dtype)), requires_grad, device)


def is_tensor(obj: Any) -> bool:
    """Whether `obj` is an engine Tensor."""
    return isinstance(obj, Tensor)
